#include "runner.h"

#include <cstdio>
#include <cstring>
#include <memory>
#include <vector>

#include "errors.h"
#include "message_buffers.h"
#include "pattern.h"
#include "progress_watch.h"
#include "report.h"
#include "transport.h"

namespace weft::perf {
namespace {

constexpr uint64_t kMagic = 0x77656674'70657266ull;  // "weftperf"
constexpr uint32_t kProtocol = 1;

struct Hello {
  uint64_t magic;
  uint32_t protocol;
  uint32_t raw;  // 1: --raw-ofi
};

// Rank 0's test parameters; rank 1 adopts them.
struct WireConfig {
  uint64_t min_bytes, max_bytes, iter_bytes, buffer_bytes;
  double step_factor;
  int32_t iters, warmup, depth, check, run_latency, run_bw;
};

void agree(int rank, Bootstrap& boot, Options& opts) {
  Hello mine{kMagic, kProtocol, opts.raw() ? 1u : 0u};
  boot.send_pod(MsgKind::hello, mine);
  auto theirs = boot.recv_pod<Hello>(MsgKind::hello);
  if (theirs.magic != kMagic || theirs.protocol != kProtocol) {
    throw PerfError("peer " + boot.peer() + " does not speak this weft-perf protocol");
  }
  if (theirs.raw != mine.raw) {
    throw PerfError(std::string("this side uses ") + (mine.raw ? "--raw-ofi" : "a plugin") +
                    " but the peer uses " + (theirs.raw ? "--raw-ofi" : "a plugin"));
  }
  if (rank == 0) {
    WireConfig c{opts.min_bytes,   opts.max_bytes,   opts.iter_bytes, opts.buffer_bytes,
                 opts.step_factor, opts.iters,       opts.warmup,     opts.depth,
                 opts.check,       opts.run_latency, opts.run_bw};
    boot.send_pod(MsgKind::config, c);
  } else {
    auto c = boot.recv_pod<WireConfig>(MsgKind::config);
    opts.min_bytes = c.min_bytes;
    opts.max_bytes = c.max_bytes;
    opts.iter_bytes = c.iter_bytes;
    opts.buffer_bytes = c.buffer_bytes;
    opts.step_factor = c.step_factor;
    opts.iters = c.iters;
    opts.warmup = c.warmup;
    opts.depth = c.depth;
    opts.check = c.check != 0;
    opts.run_latency = c.run_latency != 0;
    opts.run_bw = c.run_bw != 0;
  }
}

void run(int rank, Bootstrap& boot, Options& opts) {
  agree(rank, boot, opts);
  std::unique_ptr<Transport> transport =
      opts.raw() ? make_raw_ofi_transport(opts) : make_plugin_transport(opts);
  std::vector<size_t> sizes = size_sweep(opts.min_bytes, opts.max_bytes, opts.step_factor);
  if (opts.max_bytes > transport->max_message_bytes()) {
    throw PerfError("--max-bytes " + std::to_string(opts.max_bytes) +
                    " exceeds the transport's largest message (" +
                    std::to_string(transport->max_message_bytes()) + " bytes)");
  }
  transport->connect(boot);

  // Declared after the transport: deregistered before it closes.
  MessageBuffers buffers(*transport, opts, sizes);
  ProgressWatch watch(boot, opts.timeout_s);
  PatternContext ctx{*transport, boot, opts, buffers, watch, rank};

  std::vector<std::unique_ptr<Pattern>> patterns;
  if (opts.run_latency) patterns.push_back(make_latency_pattern());
  if (opts.run_bw) patterns.push_back(make_bandwidth_pattern());

  std::unique_ptr<Reporter> reporter;
  if (rank == 0) {
    Facts facts = transport->describe();
    facts.emplace_back("depth", std::to_string(opts.depth));
    facts.emplace_back("check", opts.check ? "on" : "off");
    reporter = make_reporter(opts.format, stdout);
    reporter->begin(facts);
  }
  for (auto& pattern : patterns) {
    if (reporter) reporter->section(*pattern, opts);
    for (size_t size : sizes) {
      // Large steps take seconds: say what is running.
      if (rank == 0 && !opts.quiet && size >= (size_t{4} << 20)) {
        fprintf(stderr, "# %s %s x %d ...\n", pattern->name(), format_size(size).c_str(),
                timed_iterations(opts, size));
      }
      SizeResult r = pattern->run(ctx, size);
      if (reporter) reporter->row(r);
    }
  }
  if (reporter) reporter->end();
  uint32_t bye = 0;
  boot.send_pod(MsgKind::bye, bye);
  boot.recv_pod<uint32_t>(MsgKind::bye);
}

}  // namespace

int run_rank(int rank, Bootstrap& boot, Options opts, bool print_errors) {
  try {
    run(rank, boot, opts);
    return 0;
  } catch (const PeerError& e) {
    if (print_errors) fprintf(stderr, "weft-perf (rank %d): %s\n", rank, e.what());
  } catch (const std::exception& e) {
    if (print_errors) fprintf(stderr, "weft-perf (rank %d): error: %s\n", rank, e.what());
    boot.send_error(std::string("rank ") + std::to_string(rank) + ": " + e.what());
  }
  fflush(stdout);
  return 1;
}

}  // namespace weft::perf
