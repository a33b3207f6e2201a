#include "check.h"

#include <cstdlib>

#include "weft_client/net_client.h"

namespace weft::ft {
namespace {
thread_local std::string g_label = "rank ?";
std::chrono::steady_clock::time_point g_deadline = std::chrono::steady_clock::time_point::max();
}  // namespace

void fail(const char* file, int line, const char* expr, const std::string& msg) {
  std::string f = file;
  auto slash = f.rfind('/');
  if (slash != std::string::npos) f = f.substr(slash + 1);
  throw TestFailure(g_label + ": " + f + ":" + std::to_string(line) + ": " + expr +
                    (msg.empty() ? "" : " -- " + msg));
}

const char* result_name(ncclResult_t r) {
  return nccl_result_name(r);
}

void set_rank_label(const std::string& label) {
  g_label = label;
}
const std::string& rank_label() {
  return g_label;
}

int test_timeout_s() {
  const char* s = std::getenv("WEFT_TEST_TIMEOUT");
  int v = s ? std::atoi(s) : 0;
  return v > 0 ? v : 240;
}

void start_deadline() {
  g_deadline = std::chrono::steady_clock::now() + std::chrono::seconds(test_timeout_s());
}

bool deadline_passed() {
  return std::chrono::steady_clock::now() > g_deadline;
}

void timed_out(const char* file, int line, const std::string& what) {
  fail(file, line, "deadline",
       "timed out (" + std::to_string(test_timeout_s()) + " s, WEFT_TEST_TIMEOUT) while " + what);
}

}  // namespace weft::ft
