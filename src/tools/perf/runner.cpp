#include "runner.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <iterator>
#include <memory>
#include <vector>

#include "backend.h"
#include "core/cuda/cuda_driver.h"
#include "errors.h"
#include "health.h"
#include "host_buffer.h"
#include "message_buffers.h"
#include "pattern.h"
#include "progress_watch.h"
#include "report.h"
#include "thread_team.h"
#include "wire_config.h"

namespace weft::perf {
namespace {

constexpr uint64_t kMagic = 0x77656674'70657266ull;  // "weftperf"
constexpr uint32_t kProtocol = 4;                    // 4: put, get, signal

struct Hello {
  uint64_t magic;
  uint32_t protocol;
  uint32_t raw;  // 1: --raw-ofi
};

void agree(int rank, Bootstrap& boot, Options& opts) {
  Hello mine{kMagic, kProtocol, opts.raw() ? 1u : 0u};
  boot.send_pod(MsgKind::hello, mine);
  auto theirs = boot.recv_pod<Hello>(MsgKind::hello);
  if (theirs.magic != kMagic || theirs.protocol != kProtocol) {
    throw PerfError("peer " + boot.peer() + " does not speak this weft-perf protocol (version " +
                    std::to_string(theirs.protocol) + ", this side " + std::to_string(kProtocol) +
                    ")");
  }
  if (theirs.raw != mine.raw) {
    throw PerfError(std::string("this side uses ") + (mine.raw ? "--raw-ofi" : "a plugin") +
                    " but the peer uses " + (theirs.raw ? "--raw-ofi" : "a plugin"));
  }
  if (rank == 0) {
    WireConfig c{};
    c.min_bytes = opts.min_bytes;
    c.max_bytes = opts.max_bytes;
    c.iter_bytes = opts.iter_bytes;
    c.buffer_bytes = opts.buffer_bytes;
    c.rate_max_bytes = opts.rate_max_bytes;
    c.step_factor = opts.step_factor;
    c.iters = opts.iters;
    c.warmup = opts.warmup;
    c.depth = opts.depth;
    c.check = opts.check;
    c.comms = opts.comms;
    c.idle_comms = opts.idle_comms;
    c.threads = opts.threads;
    c.group = opts.group;
    c.raw_op = static_cast<int32_t>(opts.raw_op);
    c.reg_min_bytes = opts.reg_min_bytes;
    c.reg_max_bytes = opts.reg_max_bytes;
    c.reg_step_factor = opts.reg_step_factor;
    c.mem = static_cast<int32_t>(opts.mem);
    c.dmabuf = opts.dmabuf ? 1 : 0;
    for (TestKind t : opts.tests) c.tests |= 1u << static_cast<unsigned>(t);
    if (opts.vs_raw_provider.size() >= sizeof(c.vs_raw)) {
      throw UsageError("--vs-raw provider name too long");
    }
    memcpy(c.vs_raw, opts.vs_raw_provider.data(), opts.vs_raw_provider.size());
    boot.send_pod(MsgKind::config, c);
  } else {
    auto c = boot.recv_pod<WireConfig>(MsgKind::config);
    check_config(c, boot.peer());
    opts.min_bytes = c.min_bytes;
    opts.max_bytes = c.max_bytes;
    opts.iter_bytes = c.iter_bytes;
    opts.buffer_bytes = c.buffer_bytes;
    opts.rate_max_bytes = c.rate_max_bytes;
    opts.step_factor = c.step_factor;
    opts.iters = c.iters;
    opts.warmup = c.warmup;
    opts.depth = c.depth;
    opts.check = c.check != 0;
    opts.comms = c.comms;
    opts.idle_comms = c.idle_comms;
    opts.threads = c.threads;
    opts.group = c.group;
    opts.raw_op = static_cast<RawOp>(c.raw_op);
    opts.reg_min_bytes = c.reg_min_bytes;
    opts.reg_max_bytes = c.reg_max_bytes;
    opts.reg_step_factor = c.reg_step_factor;
    opts.mem = static_cast<MemType>(c.mem);
    opts.dmabuf = c.dmabuf != 0;
    opts.tests.clear();
    for (TestKind t : kAllTests) {
      if ((c.tests & (1u << static_cast<unsigned>(t))) != 0) opts.tests.push_back(t);
    }
    c.vs_raw[sizeof(c.vs_raw) - 1] = '\0';
    opts.vs_raw_provider = c.vs_raw;
  }
}

// Both ranks must use the same group sizes: take the smaller maxRecvs.
int agreed_max_recvs(Bootstrap& boot, const Backend& backend) {
  int32_t mine = backend.max_recvs();
  boot.send_pod(MsgKind::config, mine);
  int32_t theirs = boot.recv_pod<int32_t>(MsgKind::config);
  if (theirs < 1 || theirs > kMaxGroup) {
    throw PerfError("peer " + boot.peer() + " reports maxRecvs " + std::to_string(theirs));
  }
  return std::min(mine, theirs);
}

// --mem cuda: the CUDA driver weft-perf allocates and copies GPU memory
// with (its own instance; the plugin opens its own).
std::unique_ptr<cuda::Driver> open_cuda(const Options& opts) {
  if (opts.mem != MemType::cuda) return nullptr;
  std::string reason;
  std::unique_ptr<cuda::Driver> driver = cuda::Driver::open(opts.cuda_lib, &reason);
  if (!driver) {
    throw PerfError("--mem cuda: cannot use the CUDA driver " + opts.cuda_lib + ": " + reason +
                    " (see --cuda-lib)");
  }
  if (driver->device_count() < 1) {
    throw PerfError("--mem cuda: the CUDA driver " + opts.cuda_lib + " reports no GPU");
  }
  return driver;
}

// One sweep of every selected test over one backend. `plugin` false: the
// raw provider run of --vs-raw, which has no reg test.
RunResult measure(int rank, Bootstrap& boot, const Options& opts, Backend& backend,
                  Reporter* reporter, const cuda::Driver* driver, bool plugin) {
  std::vector<size_t> sizes = size_sweep(opts.min_bytes, opts.max_bytes, opts.step_factor);
  const bool transfers = opts.runs_transfers();
  // The plugin cuts one-sided operations to its provider's largest; the
  // raw run posts each as one.
  if ((transfers || (opts.runs_one_sided() && !plugin)) &&
      opts.max_bytes > backend.max_message_bytes()) {
    throw PerfError("--max-bytes " + std::to_string(opts.max_bytes) +
                    " exceeds the transport's largest message (" +
                    std::to_string(backend.max_message_bytes()) + " bytes)");
  }
  // Idle comms come after the ones in use; the patterns never touch them.
  // One-sided runs: the raw run's endpoint only (the plugin's comm is the
  // window's, opened below).
  if (!opts.runs_one_sided() || !plugin) {
    backend.connect(boot, plugin ? opts.comms + opts.idle_comms : opts.comms);
  }
  const int max_recvs = agreed_max_recvs(boot, backend);
  if (opts.runs(TestKind::grouped) && opts.group > max_recvs) {
    throw PerfError("--group " + std::to_string(opts.group) + " exceeds maxRecvs " +
                    std::to_string(max_recvs) + " of " + backend.label());
  }

  // Declared after the backend: deregistered before it closes. The reg
  // test alone needs no message buffers.
  std::vector<std::unique_ptr<MessageBuffers>> buffers;
  if (transfers) {
    for (int c = 0; c < opts.comms; ++c) {
      buffers.push_back(std::make_unique<MessageBuffers>(backend, c, opts, sizes, driver));
    }
  }
  backend.exchange_regions(boot);
  // One-sided: the window both ranks register (closed before the backend).
  HostBuffer window;
  struct WindowCloser {
    Backend* backend = nullptr;
    ~WindowCloser() {
      if (backend != nullptr) backend->close_window();
    }
  } window_closer;
  if (opts.runs_one_sided()) {
    // signal uses two halves (outbox and inbox).
    const size_t largest = opts.runs(TestKind::signal) ? 2 * opts.max_bytes : opts.max_bytes;
    window = HostBuffer(kWindowDataOffset + std::max(largest, opts.buffer_bytes));
    window_closer.backend = &backend;
    backend.open_window(boot, rank, window.data(), window.size());
  }
  ThreadTeam team(opts.threads);
  ProgressWatch watch(&boot, opts.timeout_s, &team.abort_flag());
  FlushCounters flushes;
  PatternContext ctx{backend, boot, opts, buffers, watch, team, rank, driver, &flushes, plugin};
  ctx.window = window.data();
  ctx.window_bytes = window.size();

  RunResult run;
  run.label = backend.label();
  run.facts = backend.describe();
  run.facts.emplace_back("depth", std::to_string(opts.depth));
  run.facts.emplace_back("comms", std::to_string(opts.comms));
  if (plugin && opts.idle_comms > 0) {
    run.facts.emplace_back("idle_comms", std::to_string(opts.idle_comms));
  }
  run.facts.emplace_back("threads", std::to_string(opts.threads));
  run.facts.emplace_back("check", opts.check ? "on" : "off");
  run.facts.emplace_back("mem", opts.mem == MemType::cuda ? "cuda" : "host");
  if (opts.mem == MemType::cuda) {
    run.facts.emplace_back("registration", opts.dmabuf ? "regMrDmaBuf" : "regMr");
    run.facts.emplace_back("cuda_lib", opts.cuda_lib);
    run.facts.emplace_back("gpu", "0 of " + std::to_string(driver->device_count()));
  }
  if (reporter) reporter->begin_run(run.label, run.facts);

  // The step count for progress lines.
  size_t total = 0;
  std::vector<std::unique_ptr<Pattern>> patterns;
  for (TestKind t : opts.tests) {
    if (t == TestKind::reg && !plugin) continue;
    patterns.push_back(make_pattern(t));
    for (size_t s : patterns.back()->sizes(opts)) {
      if (patterns.back()->wants(opts, s)) total += patterns.back()->groups(opts, max_recvs).size();
    }
  }
  size_t step = 0;
  for (auto& pattern : patterns) {
    if (reporter) reporter->section(*pattern, opts);
    for (int group : pattern->groups(opts, max_recvs)) {
      for (size_t size : pattern->sizes(opts)) {
        if (!pattern->wants(opts, size)) continue;
        ++step;
        // Large steps take seconds: say what is running.
        if (rank == 0 && !opts.quiet && size >= (size_t{1} << 20)) {
          int iters = pattern->planned_iterations(opts, size);
          fprintf(stderr, "# [%zu/%zu] %s %s%s%s ...\n", step, total, pattern->name(),
                  readable_size(size).c_str(),
                  group > 0 ? (" n=" + std::to_string(group)).c_str() : "",
                  iters > 0 ? (" x " + std::to_string(iters)).c_str() : "");
        }
        for (SizeResult& r : pattern->run(ctx, size, group)) {
          if (reporter) reporter->row(r);
          run.rows.push_back(std::move(r));
        }
      }
    }
  }
  if (opts.mem == MemType::cuda && transfers) {
    // How many receives into GPU memory were flushed, and how many flushes
    // the plugin had work for (NULL request: nothing to flush), both ranks
    // together (in bw only rank 1 receives).
    uint64_t mine[2] = {flushes.issued.load(), flushes.requests.load()};
    boot.send(MsgKind::status, mine, sizeof(mine));
    uint64_t theirs[2] = {};
    boot.recv(MsgKind::status, theirs, sizeof(theirs));
    run.totals.emplace_back("flushes", std::to_string(mine[0] + theirs[0]));
    run.totals.emplace_back("flush_requests", std::to_string(mine[1] + theirs[1]));
  }
  if (reporter) reporter->end_run(run);
  return run;
}

// 0, or kHealthFailedStatus when --health judged the run and it failed.
int run(int rank, Bootstrap& boot, Options& opts) {
  agree(rank, boot, opts);
  if (rank == 0 && !opts.samples_path.empty()) start_latency_samples(opts.samples_path);
  std::unique_ptr<Reporter> reporter;
  if (rank == 0) reporter = make_reporter(opts.format, stdout, opts);
  Reporter* rep = reporter.get();

  // Before the backend (NCCL initializes CUDA before its net plugin), and
  // alive until every GPU buffer is freed.
  std::unique_ptr<cuda::Driver> driver = open_cuda(opts);
  std::vector<RunResult> runs;
  {
    std::unique_ptr<Backend> backend =
        opts.raw() ? make_raw_ofi_backend(opts) : make_plugin_backend(opts);
    runs.push_back(measure(rank, boot, opts, *backend, rep, driver.get(), !opts.raw()));
  }
  if (!opts.vs_raw_provider.empty()) {
    std::unique_ptr<Backend> raw = make_raw_ofi_backend(opts);
    runs.push_back(measure(rank, boot, opts, *raw, rep, driver.get(), false));
  }
  if (rep) {
    if (runs.size() == 2) rep->comparison(runs[0], runs[1]);
    rep->end();
  }
  uint32_t bye = 0;
  boot.send_pod(MsgKind::bye, bye);
  boot.recv_pod<uint32_t>(MsgKind::bye);
  if (rank != 0 || !opts.health) return 0;
  fflush(stdout);
  const HealthVerdict verdict = judge_health(runs[0], opts);
  for (const std::string& line : verdict.lines) fprintf(stderr, "%s\n", line.c_str());
  return verdict.pass ? 0 : kHealthFailedStatus;
}

}  // namespace

// Rank 1 sizes memory and threads from these: refuse nonsense rather than
// allocate or spawn without bound.
void check_config(const WireConfig& c, const std::string& peer) {
  const char* bad = nullptr;
  if (c.min_bytes > c.max_bytes || c.max_bytes > (uint64_t{1} << 40)) bad = "sizes";
  if (!(c.step_factor > 1.0 && c.step_factor <= 1024)) bad = "step factor";
  if (c.iters < 1 || c.warmup < 0 || c.depth < 1 || c.depth > 1024) bad = "iterations or depth";
  if (c.comms < 1 || c.comms > 256 || c.threads < 1 || c.threads > c.comms) bad = "comms/threads";
  if (c.idle_comms < 0 || c.idle_comms > kMaxIdleComms) bad = "idle comms";
  if (c.group < 0 || c.group > kMaxGroup) bad = "group";
  if (c.raw_op != static_cast<int32_t>(RawOp::tagged) &&
      c.raw_op != static_cast<int32_t>(RawOp::write)) {
    bad = "raw operation";
  }
  if (c.tests == 0 || c.tests >= (1u << std::size(kAllTests))) bad = "tests";
  if (c.reg_min_bytes > c.reg_max_bytes || c.reg_max_bytes > (uint64_t{1} << 40) ||
      !(c.reg_step_factor > 1.0 && c.reg_step_factor <= 1024)) {
    bad = "reg sizes";
  }
  if ((c.mem != static_cast<int32_t>(MemType::host) &&
       c.mem != static_cast<int32_t>(MemType::cuda)) ||
      (c.dmabuf != 0 && c.dmabuf != 1) ||
      (c.dmabuf == 1 && c.mem != static_cast<int32_t>(MemType::cuda))) {
    bad = "memory type";
  }
  if (bad != nullptr) {
    throw PerfError("peer " + peer + " sent an invalid configuration (" + bad + ")");
  }
}

int run_rank(int rank, Bootstrap& boot, Options opts, bool print_errors) {
  try {
    return run(rank, boot, opts);
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
