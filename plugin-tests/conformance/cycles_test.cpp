// Repeated init/finalize cycles, each with a connection and a verified
// transfer, must not leak: open fds, threads and resident memory are
// compared after a few warm-up cycles and after the rest. NCCL calls init
// and finalize per communicator (v11+) or loads the library per process and
// may unload it (older versions); a plugin that leaks per cycle runs a
// long-lived job out of fds or memory. Likewise connect/transfer/close
// cycles inside one init: NCCL opens and closes comms as communicators
// come and go, for the life of the process.
#include <catch2/catch.hpp>
#include <cstdlib>

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

void require_no_growth(const ProcUsage& before, const ProcUsage& after, long max_rss_growth_kib,
                       const std::string& numbers) {
  FT_REQUIRE(after.fds - before.fds <= kMaxFdGrowth, "open fds grew by "
                                                         << after.fds - before.fds << " (limit "
                                                         << kMaxFdGrowth << "): " << numbers);
  FT_REQUIRE(after.threads - before.threads <= kMaxThreadGrowth,
             "threads grew by " << after.threads - before.threads << " (limit " << kMaxThreadGrowth
                                << "; threads alive after finalize?): " << numbers);
#if !defined(__SANITIZE_ADDRESS__)
  // AddressSanitizer's quarantine keeps freed memory resident (tens of MiB
  // here); its LeakSanitizer exit check stands in for this one there.
  FT_REQUIRE(after.rss_kib - before.rss_kib <= max_rss_growth_kib,
             "VmRSS grew by " << after.rss_kib - before.rss_kib << " KiB (limit "
                              << max_rss_growth_kib << "): " << numbers);
#else
  (void)max_rss_growth_kib;
#endif
  if (std::getenv("WEFT_TEST_VERBOSE"))
    std::fprintf(stderr, "%s: %s\n", rank_label().c_str(), numbers.c_str());
}

void cycles(int v, Rank& rk, bool receiver) {
  std::unique_ptr<NetClient> c;
  for (int i = 0; i < kWarmup; ++i)
    transfer_after_restart(c, v, rk, receiver, pattern_seed(300, i));
  const ProcUsage before = proc_usage();
  for (int i = 0; i < kCycles; ++i)
    transfer_after_restart(c, v, rk, receiver, pattern_seed(301, i));
  const ProcUsage after = proc_usage();
  require_no_growth(before, after, kMaxRssGrowthKib,
                    "cycles v" + std::to_string(v) + " after " + std::to_string(kWarmup) +
                        " warm-up cycles: " + to_string(before) + "; after " +
                        std::to_string(kCycles) + " more: " + to_string(after));
}

// Connect/transfer/close cycles on one initialized plugin: WEFT_TEST_COMM_CYCLES
// of them (default 200; the note on issue 18 reports 10^4). Message sizes
// rotate over the empty, eager and clear-to-send paths; every byte checked.
constexpr size_t kCommCycleSizes[] = {0, 8, 4096, 65536 + 3};
constexpr int kCommWarmup = 20;
// Any growth per comm shows over many cycles: 1 KiB per comm is 10 MiB at
// 10^4. Against the noise of 200 cycles this bounds a leak of 20 KiB per comm.
constexpr long kMaxCommRssGrowthKib = 4 * 1024;
constexpr long kMaxCommHeapGrowthBytes = 2048;

int comm_cycle_count() {
  const char* s = std::getenv("WEFT_TEST_COMM_CYCLES");
  const int n = s != nullptr ? std::atoi(s) : 200;
  return n > 0 ? n : 200;
}

void comm_cycle(NetClient& c, int dev, Rank& rk, bool receiver, int i, Buffer& buf) {
  const size_t n = kCommCycleSizes[i % std::size(kCommCycleSizes)];
  const uint64_t seed = pattern_seed(302, i);
  const std::string what = "comm cycle " + std::to_string(i) + ", " + std::to_string(n) + " bytes";
  if (receiver) {
    void* rc = recv_side_connect(c, dev, *rk.peer);
    {
      Mr mr(c, rc, buf.data(), buf.size());
      buf.poison();
      void* req = post_irecv1(c, rc, buf.data(), buf.size(), i & 0xff, mr.get());
      const int got = wait_ok(c, req, what);
      check_received(buf, got, n, buf.size(), seed, what);
    }
    FT_OK(c.close_recv(rc));
  } else {
    void* sc = send_side_connect(c, dev, *rk.peer);
    fill_pattern(buf.data(), n, seed);
    {
      Mr mr(c, sc, buf.data(), buf.size());
      void* req = post_isend(c, sc, buf.data(), n, i & 0xff, mr.get());
      wait_ok(c, req, what);
    }
    // At once, as NCCL may: the receiver may not have the message yet, and
    // the close (this process's last comm: its endpoint and liveness link
    // close too) must not lose it (provider_quirks.h,
    // completes_before_delivery).
    FT_OK(c.close_send(sc));
  }
}

void comm_cycles(int v, Rank& rk, bool receiver) {
  auto c = open_plugin(v);
  const int dev = test_device(*c);
  const int count = comm_cycle_count();
  Buffer buf(kCommCycleSizes[std::size(kCommCycleSizes) - 1]);
  for (int i = 0; i < kCommWarmup; ++i) comm_cycle(*c, dev, rk, receiver, i, buf);
  const ProcUsage before = proc_usage();
  for (int i = kCommWarmup; i < kCommWarmup + count; ++i) comm_cycle(*c, dev, rk, receiver, i, buf);
  const ProcUsage after = proc_usage();
#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
  // Every comm's own memory must go back: malloc's count is exact where
  // resident memory is not. The bound leaves room for shm's 280 bytes per
  // endpoint and softverbs' model (docs/sanitizers.md), not for a
  // completion queue per comm (about 3 KiB on softverbs, which leaked).
  const long heap_growth = after.heap_in_use_kib - before.heap_in_use_kib;
  FT_REQUIRE(heap_growth * 1024 <= kMaxCommHeapGrowthBytes * count,
             "malloc's heap in use grew by " << heap_growth << " KiB over " << count
                                             << " comms (limit " << kMaxCommHeapGrowthBytes
                                             << " bytes per comm)");
#endif
  require_no_growth(before, after, kMaxCommRssGrowthKib,
                    "comm cycles v" + std::to_string(v) + " after " + std::to_string(kCommWarmup) +
                        " warm-up comms: " + to_string(before) + "; after " +
                        std::to_string(count) + " more: " + to_string(after));
  rk.peer->sync("comm-cycles-done");
  FT_OK(c->finalize());
}

}  // namespace

TEST_CASE("init/finalize cycles with a transfer each leak no fds, threads or memory", "[cycles]") {
  const int v = GENERATE(filter(abi_version_selected, range(6, 13)));
  INFO("ABI v" << v);
  auto r = run_two([&](Rank& rk) { cycles(v, rk, true); }, [&](Rank& rk) { cycles(v, rk, false); });
  REQUIRE_RANKS(r);
}

TEST_CASE("connect/transfer/close cycles leak no fds, threads or memory", "[comm-cycles]") {
  // One version: comms share the data path under every version.
  const int v = GENERATE(filter(abi_version_selected, values({12})));
  auto r = run_two([&](Rank& rk) { comm_cycles(v, rk, true); },
                   [&](Rank& rk) { comm_cycles(v, rk, false); });
  REQUIRE_RANKS(r);
}
