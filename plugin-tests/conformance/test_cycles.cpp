// Repeated init/finalize cycles, each with a connection and a verified
// transfer, must not leak: open fds, threads and resident memory are
// compared after a few warm-up cycles and after the rest. NCCL calls init
// and finalize per communicator (v11+) or loads the library per process and
// may unload it (older versions); a plugin that leaks per cycle runs a
// long-lived job out of fds or memory.
#include <catch2/catch.hpp>

#include "net_ops.h"
#include "pattern.h"
#include "proc_usage.h"
#include "restart.h"
#include "two_rank.h"

using namespace weft;
using namespace weft::ft;

namespace {

constexpr int kWarmup = 2;
constexpr int kCycles = 12;
// Bounds on growth over kCycles: far below one leak per cycle.
constexpr long kMaxFdGrowth = 2;
constexpr long kMaxThreadGrowth = 1;
constexpr long kMaxRssGrowthKib = 8 * 1024;

void cycles(int v, Rank& rk, bool receiver) {
  std::unique_ptr<NetClient> c;
  for (int i = 0; i < kWarmup; ++i)
    transfer_after_restart(c, v, rk, receiver, pattern_seed(300, i));
  const ProcUsage before = proc_usage();
  for (int i = 0; i < kCycles; ++i)
    transfer_after_restart(c, v, rk, receiver, pattern_seed(301, i));
  const ProcUsage after = proc_usage();
  const std::string numbers = "after " + std::to_string(kWarmup) +
                              " warm-up cycles: " + to_string(before) + "; after " +
                              std::to_string(kCycles) + " more: " + to_string(after);
  FT_REQUIRE(after.fds - before.fds <= kMaxFdGrowth, "open fds grew by "
                                                         << after.fds - before.fds << " (limit "
                                                         << kMaxFdGrowth << "): " << numbers);
  FT_REQUIRE(after.threads - before.threads <= kMaxThreadGrowth,
             "threads grew by " << after.threads - before.threads << " (limit " << kMaxThreadGrowth
                                << "; threads alive after finalize?): " << numbers);
#if !defined(__SANITIZE_ADDRESS__)
  // AddressSanitizer's quarantine keeps freed memory resident (tens of MiB
  // here); its LeakSanitizer exit check stands in for this one there.
  FT_REQUIRE(after.rss_kib - before.rss_kib <= kMaxRssGrowthKib,
             "VmRSS grew by " << after.rss_kib - before.rss_kib << " KiB (limit "
                              << kMaxRssGrowthKib << "): " << numbers);
#endif
  if (std::getenv("WEFT_TEST_VERBOSE"))
    std::fprintf(stderr, "cycles v%d %s: %s\n", v, rank_label().c_str(), numbers.c_str());
}

}  // namespace

TEST_CASE("init/finalize cycles with a transfer each leak no fds, threads or memory", "[cycles]") {
  const int v = GENERATE(filter(abi_version_selected, range(6, 13)));
  INFO("ABI v" << v);
  auto r = run_two([&](Rank& rk) { cycles(v, rk, true); }, [&](Rank& rk) { cycles(v, rk, false); });
  REQUIRE_RANKS(r);
}
