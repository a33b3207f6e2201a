// The per-process counters behind struct softverbs_counters.

#include "counters.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cstring>

#include "env.h"
#include "process.h"

namespace softverbs {

namespace {

std::atomic<uint64_t> g_counters[kCounterCount];

constexpr const char* kCounterNames[kCounterCount] = {
    "doorbells",          "send_wrs",      "send_wrs_send", "send_wrs_send_imm", "send_wrs_write",
    "send_wrs_write_imm", "send_wrs_read", "inline_wrs",    "signaled_wrs",      "recv_posts",
    "recv_wrs",           "poll_calls",    "completions",   "error_completions", "bytes_written",
    "bytes_read",         "bytes_sent",    "packets_sent",  "packets_received",  "rnr_naks_sent",
    "rnr_naks_received",  "retransmits",   "ece_set",
};

static_assert(sizeof(softverbs_counters) == kCounterCount * sizeof(uint64_t),
              "softverbs_counters and Counter disagree");

}  // namespace

void count(Counter counter, uint64_t n) {
  g_counters[counter].fetch_add(n, std::memory_order_relaxed);
}

void read_counters(softverbs_counters* out) {
  uint64_t values[kCounterCount];
  for (int i = 0; i < kCounterCount; ++i) values[i] = g_counters[i].load(std::memory_order_relaxed);
  std::memcpy(out, values, sizeof(values));
}

void reset_counters() {
  for (auto& c : g_counters) c.store(0, std::memory_order_relaxed);
}

std::string counters_json() {
  std::string out = "{\"pid\":" + std::to_string(self_pid());
  for (int i = 0; i < kCounterCount; ++i) {
    out += ",\"";
    out += kCounterNames[i];
    out += "\":" + std::to_string(g_counters[i].load(std::memory_order_relaxed));
  }
  return out + "}";
}

void write_counters_file() {
  std::string path = env_string("SOFTVERBS_COUNTERS_FILE", "");
  if (path.empty()) return;
  std::string line = counters_json() + "\n";
  int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) return;
  ssize_t w = write(fd, line.data(), line.size());
  (void)w;
  close(fd);
}

}  // namespace softverbs
