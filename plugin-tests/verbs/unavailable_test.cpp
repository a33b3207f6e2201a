// Hosts where the verbs transport cannot run: init fails with a message
// that says why and what to set (WEFT_TRANSPORT=verbs), or auto mode goes
// on to libfabric. Each case runs in its own process with its own
// environment.
#include <catch2/catch.hpp>
#include <cstdlib>
#include <string>

#include "log_capture.h"
#include "net_ops.h"
#include "two_rank.h"

using namespace weft;
using namespace weft::ft;

namespace {

struct Case {
  const char* name;
  std::vector<std::pair<const char*, const char*>> env;  // value "softverbs": the test double
  ncclResult_t result;
  const char* message;
};

void run_case(const Case& c) {
  const char* softverbs = std::getenv("WEFT_IBVERBS_LIB");
  FT_REQUIRE(softverbs != nullptr, "WEFT_IBVERBS_LIB (softverbs) is not set");
  const std::string softverbs_path = softverbs;
  ::unsetenv("WEFT_TRANSPORT");
  for (const auto& [name, value] : c.env) {
    ::setenv(name, std::string(value) == "softverbs" ? softverbs_path.c_str() : value, 1);
  }
  auto plugin = load_plugin(12);
  ncclResult_t result = plugin->init(capture_log);
  const std::string log = logged_text();
  FT_REQUIRE(result == c.result, c.name << ": init returned " << result_name(result)
                                        << ", expected " << result_name(c.result) << "; log:\n"
                                        << log);
  FT_REQUIRE(log.find(c.message) != std::string::npos, c.name << ": the log does not say \""
                                                              << c.message << "\"; log:\n"
                                                              << log);
  if (result == ncclSuccess) FT_OK(plugin->finalize());
}

}  // namespace

TEST_CASE("without rdma-core, devices or a selected port, init says why", "[unavailable]") {
  const std::vector<Case> cases = {
      {"no libibverbs",
       {{"WEFT_TRANSPORT", "verbs"}, {"WEFT_IBVERBS_LIB", "/nonexistent/libibverbs.so.1"}},
       ncclSystemError,
       "/nonexistent/libibverbs.so.1"},
      {"no device",
       {{"WEFT_TRANSPORT", "verbs"}, {"SOFTVERBS_DEVICES", "0"}},
       ncclSystemError,
       "no usable port"},
      {"no port selected",
       {{"WEFT_TRANSPORT", "verbs"}, {"WEFT_IB_HCA", "mlx5_0"}},
       ncclSystemError,
       "softverbs0:1: not selected by WEFT_IB_HCA/NCCL_IB_HCA"},
      {"NCCL_IB_HCA honoured",
       {{"WEFT_TRANSPORT", "verbs"}, {"NCCL_IB_HCA", "^softverbs0"}},
       ncclSystemError,
       "not selected by WEFT_IB_HCA/NCCL_IB_HCA"},
      {"malformed HCA list",
       {{"WEFT_TRANSPORT", "verbs"}, {"WEFT_IB_HCA", "^"}},
       ncclSystemError,
       "names no device after its ^ or ="},
      // Then libfabric, which here has only software providers: auto
      // declines them, so NCCL would use its own transports.
      {"auto without libibverbs goes on to libfabric",
       {{"WEFT_IBVERBS_LIB", "/nonexistent/libibverbs.so.1"}, {"WEFT_OFI_PROVIDER", ""}},
       ncclSystemError,
       "candidate transport verbs [rdma-core]: not used: cannot load /nonexistent/libibverbs.so.1"},
  };
  for (const Case& c : cases) {
    INFO(c.name);
    auto r = run_one([&](Rank&) { run_case(c); });
    REQUIRE_RANKS(r);
  }
}
