#include "options.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>

#include "backend.h"
#include "errors.h"
#include "weft/param_parse.h"

namespace weft::perf {
namespace {

std::optional<long long> parse_int(std::string_view text) {
  if (text.empty()) return std::nullopt;
  std::string s(text);
  char* end = nullptr;
  errno = 0;
  long long v = strtoll(s.c_str(), &end, 10);
  if (errno != 0 || end == s.c_str() || *end != '\0') return std::nullopt;
  return v;
}

int int_in_range(const std::string& opt, std::string_view text, long long lo, long long hi) {
  auto v = parse_int(text);
  if (!v || *v < lo || *v > hi) {
    throw UsageError(opt + " expects an integer in [" + std::to_string(lo) + ", " +
                     std::to_string(hi) + "], got '" + std::string(text) + "'");
  }
  return static_cast<int>(*v);
}

size_t size_arg(const std::string& opt, std::string_view text) {
  auto v = parse_size(text);
  if (!v)
    throw UsageError(opt + " expects a size like 8, 64K, 4M, 1G; got '" + std::string(text) + "'");
  return *v;
}

std::vector<std::string> split_list(const std::string& text) {
  std::vector<std::string> items;
  size_t start = 0;
  while (start <= text.size()) {
    size_t comma = text.find(',', start);
    if (comma == std::string::npos) comma = text.size();
    if (comma > start) items.push_back(text.substr(start, comma - start));
    start = comma + 1;
  }
  return items;
}

// --job: the ranks come from --local --ranks N, --server --ranks N (rank 0),
// --client HOST --rank R --ranks N, or a launcher; the two-rank tests'
// options do not apply.
void check_job_options(const Options& o, bool two_rank_options, bool have_ranks, bool have_rank) {
  if (two_rank_options) {
    throw UsageError(
        "--job runs its own pattern on host memory through the plugin: --test, --comms (use "
        "--channels), --idle-comms, --threads, --raw-ofi, --vs-raw, --mem cuda and --health "
        "do not apply");
  }
  const bool launched = !o.launcher.empty();
  if (launched && (have_ranks || have_rank))
    throw UsageError("started by " + o.launcher + ": the ranks come from it; drop --ranks/--rank");
  if (!launched && o.role != Role::local && !have_ranks)
    throw UsageError("--job with --server or --client needs --ranks N");
  if (!launched && o.role == Role::client && (!have_rank || o.rank == 0))
    throw UsageError("--job --client needs --rank R (1..ranks-1)");
  if (!launched && o.role != Role::client && have_rank)
    throw UsageError("--rank applies to --job --client (rank 0 is the server)");
  if (o.rank >= o.ranks) {
    throw UsageError("rank " + std::to_string(o.rank) + " of a job of " + std::to_string(o.ranks) +
                     " ranks");
  }
}

std::vector<TestKind> parse_tests(const std::string& text) {
  std::vector<TestKind> tests;
  size_t start = 0;
  while (start <= text.size()) {
    size_t comma = text.find(',', start);
    std::string item = text.substr(start, comma == std::string::npos ? comma : comma - start);
    bool known = false;
    if (item == "all") {
      tests.insert(tests.end(), std::begin(kTransferTests), std::end(kTransferTests));
      known = true;
    }
    if (item == "one-sided") {
      tests.insert(tests.end(), std::begin(kOneSidedTests), std::end(kOneSidedTests));
      known = true;
    }
    for (TestKind t : kAllTests) {
      if (item == test_name(t)) {
        tests.push_back(t);
        known = true;
      }
    }
    if (!known) {
      throw UsageError(
          "--test expects a comma-separated list of latency, bw, bibw, rate, "
          "grouped, reg, put, get, signal, all or one-sided; got '" +
          item + "'");
    }
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  std::vector<TestKind> ordered;  // report order, no duplicates
  for (TestKind t : kAllTests) {
    for (TestKind u : tests) {
      if (u == t) {
        ordered.push_back(t);
        break;
      }
    }
  }
  return ordered;
}

// Under mpirun/srun without --local/--server/--client: rank 0 serves, rank 1
// connects to it.
void apply_launcher(Options& o, EnvLookup env) {
  std::optional<LaunchInfo> info = detect_launcher(env);
  if (!info) return;
  if (o.job()) {
    if (info->size < 2) {
      throw UsageError("started by " + info->launcher + " with " + std::to_string(info->size) +
                       " rank; a job needs at least 2");
    }
    o.ranks = info->size;
    o.rank = info->rank;
  } else if (info->size != 2) {
    throw UsageError("started by " + info->launcher + " with " + std::to_string(info->size) +
                     " ranks; weft-perf runs as exactly 2 (e.g. mpirun -np 2, srun -n 2)");
  }
  o.launcher = info->launcher;
  if (info->rank == 0) {
    o.role = Role::server;
  } else {
    if (info->server_host.empty()) {
      throw UsageError("started by " + info->launcher +
                       " across hosts: cannot tell where rank 0 runs; set WEFT_PERF_SERVER to "
                       "its host name (e.g. mpirun -x WEFT_PERF_SERVER=node1)");
    }
    o.role = Role::client;
    o.host = info->server_host;
  }
}

}  // namespace

const char* test_name(TestKind t) {
  switch (t) {
    case TestKind::latency:
      return "latency";
    case TestKind::bw:
      return "bw";
    case TestKind::bibw:
      return "bibw";
    case TestKind::rate:
      return "rate";
    case TestKind::grouped:
      return "grouped";
    case TestKind::reg:
      return "reg";
    case TestKind::put:
      return "put";
    case TestKind::get:
      return "get";
    case TestKind::signal:
      return "signal";
  }
  return "?";
}

bool is_transfer_test(TestKind t) {
  return t != TestKind::reg && !is_one_sided_test(t);
}

bool is_one_sided_test(TestKind t) {
  return t == TestKind::put || t == TestKind::get || t == TestKind::signal;
}

bool Options::runs(TestKind t) const {
  for (TestKind u : tests) {
    if (u == t) return true;
  }
  return false;
}

bool Options::runs_transfers() const {
  for (TestKind u : tests) {
    if (is_transfer_test(u)) return true;
  }
  return false;
}

bool Options::runs_one_sided() const {
  for (TestKind u : tests) {
    if (is_one_sided_test(u)) return true;
  }
  return false;
}

std::string readable_size(size_t bytes) {
  static const char* const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int unit = 0;
  size_t v = bytes;
  while (unit < 4 && v >= 1024 && v % 1024 == 0) {
    v /= 1024;
    ++unit;
  }
  return std::to_string(v) + " " + units[unit];
}

std::vector<size_t> size_sweep(size_t min_bytes, size_t max_bytes, double factor) {
  std::vector<size_t> sizes;
  size_t s = min_bytes;
  while (s <= max_bytes) {
    sizes.push_back(s);
    double next = std::floor(static_cast<double>(s) * factor);
    if (next >= static_cast<double>(std::numeric_limits<size_t>::max())) break;
    size_t n = static_cast<size_t>(next);
    s = n > s ? n : s + 1;
  }
  return sizes;
}

std::string usage_text(const std::string& default_plugin) {
  return R"(weft-perf: point-to-point latency, bandwidth and message rate of an ncclNet
plugin (or of a libfabric provider directly), driven through the plugin ABI
exactly as NCCL's proxy drives it. No GPU, MPI or NCCL needed.

Usage:
  weft-perf [--local] [options]                 two ranks forked on this host (default)
  weft-perf --server [--port P] [options]        rank 0, waits for a client
  weft-perf --client HOST [--port P] [options]   rank 1, connects to the server
  mpirun -np 2 weft-perf [options]               ranks from the launcher's variables
  srun -n 2 weft-perf [options]                  (no MPI library used; see below)
The client takes the test parameters (tests, sizes, iterations, depth, comms,
checking, --mem, --dmabuf) from the server; transport options (--plugin/--abi/
--dev or --raw-ofi/--domain, --cuda-lib) are per host but both sides must use
the same kind.

Transport:
  --plugin PATH        ncclNet plugin to load (default:
                       )" +
         default_plugin +
         R"()
  --abi N              ncclNetPlugin_vN to use, 6..12 (default: newest exported)
  --dev N              plugin device index (default 0). The plugin picks its
                       network from its environment, e.g. for weft
                       WEFT_OFI_PROVIDER=tcp WEFT_OFI_DOMAIN=lo
  --raw-ofi PROVIDER   bypass the plugin: run the same patterns on libfabric
                       FI_EP_RDM endpoints, e.g. "tcp", "tcp;ofi_rxm", "shm"
                       (the provider ceiling)
  --vs-raw PROVIDER    plugin mode: after the plugin run, run the same tests on
                       the raw provider in the same process pair and print
                       plugin/raw ratios
  --raw-op OP          raw runs: tagged (fi_tsend/fi_trecv, default) or write
                       (fi_writedata into the peer's buffer, size as remote
                       CQ data; the RMA ceiling)
  --domain NAME        raw runs: libfabric domain, e.g. "lo" for tcp
  --fabric NAME        raw runs: libfabric fabric, e.g. "efa-direct" (the
                       device itself) or "efa" (libfabric's RDM protocol)

Ranks and bootstrap (a TCP connection carrying handles and control words):
  --local              fork two ranks on this host over 127.0.0.1
  --server             be rank 0 and listen on --port
  --client HOST        be rank 1 and connect to HOST:--port
  --port P             bootstrap TCP port (default 18515)
  --timeout S          seconds to wait for the peer to connect, and for any
                       progress during a test (default 30)
  Under mpirun (Open MPI, MPICH, Intel MPI, MVAPICH) or srun with 2 ranks and
  none of --local/--server/--client, rank 0 serves and rank 1 connects to it:
  on 127.0.0.1 when both ranks share a host, to the first node of the Slurm
  step, or to $WEFT_PERF_SERVER (e.g. mpirun -x WEFT_PERF_SERVER=node1).

Jobs (N ranks, each with the comms of a pattern, set up as NCCL does: every
listen, the handles through rank 0, connects and accepts polled together;
then checked bytes and a bandwidth round on every comm; rank 0 reports):
  --job LIST           ring, tree (double binary tree) and/or alltoall, run
                       in that order in the same processes
  --ranks N            --local: fork N ranks on this host (default 2);
                       --server/--client: the job's size
  --rank R             --client: this process's rank (1..N-1)
  --channels C         comms per pair and direction (ring and tree: per
                       channel; default 1)
  --max-bytes, --iters the bandwidth round's message size (default 256K) and
                       messages per comm (default 20)
  --max-kib-per-comm K, --max-fds-per-peer F
                       fail (exit 1) when a rank's memory per comm or fds
                       per peer rank pass K or F at their high-water marks
  --kill-rank R        rank R (not 0) kills itself once the handles are
                       exchanged, before it connects or accepts: every rank
                       with comms to it must fail naming it (exit 1)
  Under mpirun, srun or scripts/weft-job.sh (ranks in network namespaces of
  one host) the ranks come from the launcher's variables, rank 0 at
  $WEFT_PERF_SERVER (or as for two ranks). docs/weft-perf.md, "Jobs".

Tests:
  --test LIST          comma-separated: latency, bw, bibw, rate, grouped, reg,
                       put, get, signal, all (every two-sided test: not reg,
                       not one-sided) or one-sided (put,get,signal); default
                       latency,bw
                       latency: ping-pong on comm 0, one message in flight,
                         half round trip (min, median, average, p99; the
                         average is what fi_pingpong's usec/xfer shows)
                       bw: rank 0 sends, rank 1 receives, up to --depth
                         requests in flight per comm; time runs from the
                         start to the receiver's 8-byte acknowledgement
                       bibw: both ranks send and receive at once; bandwidth
                         of both directions together (the slower rank's time)
                       rate: bw for sizes up to --rate-max-bytes, read as
                         million messages per second (Mmsg/s)
                       grouped: bw into grouped receives (ncclNet irecv with
                         n > 1 buffers and tags 0..n-1), n = 1, 2, 4 ..
                         maxRecvs, or --group N
                       reg: cost of regMr+deregMr on rank 0's send comm, a
                         fresh buffer per size (default 4K .. 1G by x4 unless
                         --min-bytes/--max-bytes/--step-factor are given);
                         "fresh": nothing else registers the buffer (what a
                         registration really costs); "reuse": one
                         registration of it stays alive meanwhile (NCCL's
                         pattern; a registration cache answers these). At
                         most --iters pairs, at least 10, about 1 s each.
                       One-sided, on a window both ranks register (the
                       plugin's regMrSym; host memory, one context), run on
                       their own (not with two-sided tests or reg):
                       put: rank 0 writes into rank 1's window; latency =
                         one iput until test() says done, bw = --depth in
                         flight (raw: fi_write); bytes checked on rank 1
                       get: rank 0 reads rank 1's window, the same figures
                         (raw: fi_read); bytes checked on rank 0
                       signal: ping-pong of iputSignal (data, then +1 on the
                         peer's signal word), half round trip; the receiver
                         polls its word (raw: fi_writedata, the remote CQ
                         data as the signal); the data checked on each
  --rma-table T        one-sided tests: the plugin table to drive: rma14
                       (ncclRmaPlugin_v14, default), rma17, rma16, rma15,
                       rma13, gin13, gin12, gin11 (ncclGinPlugin_v11: no get)
  --comms N            comms (NCCL channels) to the peer, 1..256 (default 1);
                       bandwidth tests use all of them, latency comm 0
  --idle-comms N       open N more comm pairs (0..100000, default 0) that stay
                       idle through the plugin's run: what many open comms
                       cost the ones in use (test() must not scan them)
  --threads N          threads driving the comms, comm c on thread c % N
                       (default 1, at most --comms)
  --group N            grouped: only n = N (1..maxRecvs)
  --rate-max-bytes S   largest size of the rate test (default 64K)
  --min-bytes S        smallest message (default 8; 0 allowed)
  --max-bytes S        largest message (default 256M, e.g. 1G)
  --step-factor F      size multiplier between steps (default 2)
  --iters N            timed iterations per size (default 1000)
  --warmup N           untimed iterations before each size (default 10)
  --iter-bytes S       cap iterations so that iters * size <= S, at least 4
                       iterations (default 4G; 0: no cap). Warmup shrinks along.
  --depth N            requests in flight per comm, 1..1024 (default 32)
  --buffer-bytes S     per comm, rank and direction: memory for distinct
                       message slots, up to --depth slots of each size, at
                       least one (default 4M, like NCCL's 4 MiB NCCL_BUFFSIZE:
                       the working set, hence cache behaviour, resembles NCCL's)
  --no-check           do not verify received bytes
                       (default: every send slot holds a pattern keyed by
                       sender, size and slot, receive slots are poisoned; after
                       each size every byte of every slot used is checked, and
                       every completion's size inside the loop; a mismatch
                       names test, size, comm, slot and offset and fails the run)
Sizes take K, M, G, T suffixes (binary: 64K = 65536).

Memory:
  --mem TYPE           message memory: host (default; page-aligned, registered
                       as NCCL_PTR_HOST) or cuda (GPU 0 through the CUDA driver,
                       registered as NCCL_PTR_CUDA; bytes are checked through
                       host staging copies, every GPU receive is followed by
                       iflush; acknowledgements stay in host memory). Plugin
                       mode only.
  --cuda-lib PATH      --mem cuda: CUDA driver library to load (default
                       libcuda.so.1; e.g. a test double's path)
  --dmabuf             --mem cuda: register with regMrDmaBuf and a dma-buf fd
                       from the driver (closed right after the call, as NCCL
                       does); needs NCCL_PTR_DMABUF in the plugin's ptrSupport

Output (stdout; progress and errors go to stderr):
  --csv                CSV instead of the table (one row per test and size,
                       a label column per run; comparisons as # comment lines)
  --json               one JSON document instead of the table
  --quiet              no progress lines on stderr
  --samples FILE       latency: rank 0 also writes every timed iteration's half
                       round trip to FILE as CSV (run,size,iteration,half_rtt_us;
                       run is plugin or raw), to see where and when the tail
                       happens (e.g. a slow iteration every N, or a slow start:
                       memory the provider touches for the first time)
  -h, --help           this text
  scripts/plot-perf.py turns --json/--csv files into a PNG.

Health check (a pre-job test of a node pair; docs/node-check.md):
  --health             judge the run: bandwidth at the largest size against
                       the device's reported speed, latency at the smallest;
                       unless given, --test latency,bw --min-bytes 8
                       --max-bytes 8M --step-factor 1024 --comms 4. The
                       verdict goes to stderr ("health: PASS" or "health:
                       FAIL ...") and to the exit status (3: failed)
  --health-min-fraction F  bandwidth needed, as a fraction of the device's
                       speed (default 0.7)
  --health-min-gbps X  bandwidth needed in GB/s instead (devices that report
                       no speed, or a known expectation)
  --health-max-latency-us L  fail above this median latency (default: not
                       judged)

Exit status: 0 success, 1 run-time error or data mismatch, 2 bad command line,
3 --health failed.
)";
}

namespace {

double positive_number(const std::string& option, const std::string& text) {
  char* end = nullptr;
  const double value = strtod(text.c_str(), &end);
  if (end == text.c_str() || *end != '\0' || !(value > 0) || value > 1e12) {
    throw UsageError(option + " expects a positive number, got '" + text + "'");
  }
  return value;
}

}  // namespace

std::optional<Options> parse_options(int argc, char** argv, const std::string& default_plugin,
                                     EnvLookup env) {
  if (env == nullptr) env = [](const char* name) -> const char* { return getenv(name); };
  Options o;
  o.plugin_path = default_plugin;
  bool have_server = false;
  bool have_client = false;
  bool have_local = false;
  bool have_raw_op = false;
  bool have_cuda_lib = false;
  bool have_min = false;
  bool have_max = false;
  bool have_step = false;
  bool have_tests = false;
  bool have_rma_table = false;
  bool have_comms = false;
  bool have_ranks = false;
  bool have_rank = false;
  bool have_iters = false;
  bool have_job_bounds = false;
  bool have_health_threshold = false;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    std::string value;
    bool inline_value = false;
    if (arg.rfind("--", 0) == 0) {
      auto eq = arg.find('=');
      if (eq != std::string::npos) {
        value = arg.substr(eq + 1);
        arg = arg.substr(0, eq);
        inline_value = true;
      }
    }
    auto next = [&]() -> std::string {
      if (inline_value) return value;
      if (i + 1 >= argc) throw UsageError(arg + " needs a value");
      return argv[++i];
    };
    auto no_value = [&] {
      if (inline_value) throw UsageError(arg + " takes no value");
    };
    if (arg == "-h" || arg == "--help") {
      fputs(usage_text(default_plugin).c_str(), stdout);
      return std::nullopt;
    } else if (arg == "--plugin") {
      o.plugin_path = next();
    } else if (arg == "--abi") {
      o.abi = int_in_range(arg, next(), 6, 12);
    } else if (arg == "--raw-ofi") {
      o.raw_provider = next();
      if (o.raw_provider.empty()) throw UsageError("--raw-ofi needs a provider name");
    } else if (arg == "--domain") {
      o.domain = next();
    } else if (arg == "--fabric") {
      o.fabric = next();
      if (o.fabric.empty()) throw UsageError("--fabric needs a fabric name");
    } else if (arg == "--dev") {
      o.dev = int_in_range(arg, next(), 0, 1 << 20);
    } else if (arg == "--local") {
      no_value();
      have_local = true;
    } else if (arg == "--server") {
      no_value();
      have_server = true;
    } else if (arg == "--client") {
      o.host = next();
      have_client = true;
    } else if (arg == "--port") {
      o.port = static_cast<uint16_t>(int_in_range(arg, next(), 1, 65535));
    } else if (arg == "--timeout") {
      o.timeout_s = int_in_range(arg, next(), 1, 86400);
    } else if (arg == "--test") {
      o.tests = parse_tests(next());
      have_tests = true;
    } else if (arg == "--rma-table") {
      o.rma_table = next();
      have_rma_table = true;
    } else if (arg == "--raw-op") {
      std::string op = next();
      if (op == "tagged") {
        o.raw_op = RawOp::tagged;
      } else if (op == "write") {
        o.raw_op = RawOp::write;
      } else {
        throw UsageError("--raw-op expects tagged or write; got '" + op + "'");
      }
      have_raw_op = true;
    } else if (arg == "--vs-raw") {
      o.vs_raw_provider = next();
      if (o.vs_raw_provider.empty()) throw UsageError("--vs-raw needs a provider name");
    } else if (arg == "--mem") {
      std::string mem = next();
      if (mem == "host") {
        o.mem = MemType::host;
      } else if (mem == "cuda") {
        o.mem = MemType::cuda;
      } else {
        throw UsageError("--mem expects host or cuda; got '" + mem + "'");
      }
    } else if (arg == "--cuda-lib") {
      o.cuda_lib = next();
      if (o.cuda_lib.empty()) throw UsageError("--cuda-lib needs a library name or path");
      have_cuda_lib = true;
    } else if (arg == "--dmabuf") {
      no_value();
      o.dmabuf = true;
    } else if (arg == "--comms") {
      o.comms = int_in_range(arg, next(), 1, 256);
      have_comms = true;
    } else if (arg == "--job") {
      for (const std::string& name : split_list(next())) o.jobs.push_back(parse_job_pattern(name));
      if (o.jobs.empty()) throw UsageError("--job needs ring, tree or alltoall");
    } else if (arg == "--ranks") {
      o.ranks = int_in_range(arg, next(), 2, 4096);
      have_ranks = true;
    } else if (arg == "--rank") {
      o.rank = int_in_range(arg, next(), 0, 4095);
      have_rank = true;
    } else if (arg == "--channels") {
      o.channels = int_in_range(arg, next(), 1, 16384);
    } else if (arg == "--max-kib-per-comm") {
      o.job_max_kib_per_comm = positive_number(arg, next());
      have_job_bounds = true;
    } else if (arg == "--kill-rank") {
      o.job_kill_rank = int_in_range(arg, next(), 1, 4095);
      have_job_bounds = true;
    } else if (arg == "--max-fds-per-peer") {
      o.job_max_fds_per_peer = positive_number(arg, next());
      have_job_bounds = true;
    } else if (arg == "--idle-comms") {
      o.idle_comms = int_in_range(arg, next(), 0, kMaxIdleComms);
    } else if (arg == "--threads") {
      o.threads = int_in_range(arg, next(), 1, 256);
    } else if (arg == "--group") {
      o.group = int_in_range(arg, next(), 1, 64);
    } else if (arg == "--rate-max-bytes") {
      o.rate_max_bytes = size_arg(arg, next());
    } else if (arg == "--min-bytes") {
      o.min_bytes = size_arg(arg, next());
      have_min = true;
    } else if (arg == "--max-bytes") {
      o.max_bytes = size_arg(arg, next());
      have_max = true;
    } else if (arg == "--step-factor") {
      std::string f = next();
      char* end = nullptr;
      o.step_factor = strtod(f.c_str(), &end);
      if (end == f.c_str() || *end != '\0' || !(o.step_factor > 1.0) || o.step_factor > 1024) {
        throw UsageError("--step-factor expects a number in (1, 1024], got '" + f + "'");
      }
      have_step = true;
    } else if (arg == "--iters") {
      o.iters = int_in_range(arg, next(), 1, 100000000);
      have_iters = true;
    } else if (arg == "--warmup") {
      o.warmup = int_in_range(arg, next(), 0, 100000000);
    } else if (arg == "--iter-bytes") {
      o.iter_bytes = size_arg(arg, next());
    } else if (arg == "--buffer-bytes") {
      o.buffer_bytes = size_arg(arg, next());
    } else if (arg == "--depth") {
      o.depth = int_in_range(arg, next(), 1, 1024);
    } else if (arg == "--no-check") {
      no_value();
      o.check = false;
    } else if (arg == "--csv") {
      no_value();
      o.format = OutputFormat::csv;
    } else if (arg == "--json") {
      no_value();
      o.format = OutputFormat::json;
    } else if (arg == "--quiet") {
      no_value();
      o.quiet = true;
    } else if (arg == "--samples") {
      o.samples_path = next();
    } else if (arg == "--health") {
      no_value();
      o.health = true;
    } else if (arg == "--health-min-fraction") {
      o.health_min_fraction = positive_number(arg, next());
      have_health_threshold = true;
    } else if (arg == "--health-min-gbps") {
      o.health_min_gbps = positive_number(arg, next());
      have_health_threshold = true;
    } else if (arg == "--health-max-latency-us") {
      o.health_max_latency_us = positive_number(arg, next());
      have_health_threshold = true;
    } else {
      throw UsageError("unknown option '" + std::string(argv[i]) + "' (see --help)");
    }
  }
  if (have_health_threshold && !o.health) {
    throw UsageError(
        "--health-min-fraction, --health-min-gbps and --health-max-latency-us "
        "apply to --health");
  }
  if (o.health) {
    // What the check measures unless told otherwise: a small-message
    // latency and the bandwidth of 8 MiB messages over 4 comms (channels).
    if (!have_tests) o.tests = parse_tests("latency,bw");
    if (!have_min) o.min_bytes = 8;
    if (!have_max) o.max_bytes = size_t{8} << 20;
    if (!have_step) o.step_factor = 1024;
    if (!have_comms) o.comms = 4;
    if (!o.runs(TestKind::latency) && !o.runs(TestKind::bw)) {
      throw UsageError("--health judges the latency and bw tests; --test has neither");
    }
  }
  if (int(have_local) + int(have_server) + int(have_client) > 1) {
    throw UsageError("--local, --server and --client exclude each other");
  }
  o.role = have_server ? Role::server : have_client ? Role::client : Role::local;
  if (!have_local && !have_server && !have_client) apply_launcher(o, env);
  if (o.job()) {
    const bool two_rank_options = have_tests || have_comms || o.raw() ||
                                  !o.vs_raw_provider.empty() || o.mem != MemType::host ||
                                  o.idle_comms > 0 || o.threads > 1 || o.health;
    check_job_options(o, two_rank_options, have_ranks, have_rank);
    if (have_max) o.job_bytes = o.max_bytes;
    if (have_iters) o.job_iters = o.iters;
    return o;
  }
  if (have_ranks || have_rank || o.channels != 1 || have_job_bounds) {
    throw UsageError(
        "--ranks, --rank, --channels, --max-kib-per-comm, --max-fds-per-peer and --kill-rank "
        "apply to --job");
  }
  if (o.min_bytes > o.max_bytes) throw UsageError("--min-bytes is larger than --max-bytes");
  if (o.role == Role::client && o.host.empty()) throw UsageError("--client needs a host");
  if (o.raw() && o.abi != 0) throw UsageError("--abi applies to plugins, not to --raw-ofi");
  if (!o.raw() && o.vs_raw_provider.empty() && !o.domain.empty()) {
    throw UsageError(
        "--domain applies to --raw-ofi and --vs-raw; the plugin reads WEFT_OFI_DOMAIN");
  }
  if (!o.raw() && o.vs_raw_provider.empty() && !o.fabric.empty()) {
    throw UsageError(
        "--fabric applies to --raw-ofi and --vs-raw; the plugin picks its fabric from "
        "WEFT_OFI_PROTOCOL and WEFT_OFI_TAG_MATCHING");
  }
  if (!o.raw() && o.vs_raw_provider.empty() && have_raw_op) {
    throw UsageError("--raw-op applies to --raw-ofi and --vs-raw");
  }
  if (o.raw() && !o.vs_raw_provider.empty()) {
    throw UsageError("--vs-raw compares a plugin with a provider; drop --raw-ofi");
  }
  if (o.threads > o.comms) {
    throw UsageError("--threads " + std::to_string(o.threads) + " exceeds --comms " +
                     std::to_string(o.comms) + " (each thread drives at least one comm)");
  }
  if (have_raw_op && o.runs_one_sided()) {
    throw UsageError("--raw-op: the one-sided tests choose their own raw operations");
  }
  if (o.raw_op == RawOp::write && o.runs(TestKind::grouped)) {
    throw UsageError("--test grouped needs tagged receives; not available with --raw-op write");
  }
  if (o.tests.empty()) throw UsageError("--test selects no test");
  if (o.raw() && o.runs(TestKind::reg)) {
    throw UsageError("--test reg measures a plugin's regMr/deregMr; not with --raw-ofi");
  }
  if (o.runs_one_sided()) {
    for (TestKind t : o.tests) {
      if (!is_one_sided_test(t)) {
        throw UsageError(std::string("--test ") + test_name(t) +
                         " and the one-sided tests (put, get, signal) run separately");
      }
    }
    if (o.mem == MemType::cuda) {
      throw UsageError("the one-sided tests use host memory only (for now); drop --mem cuda");
    }
    if (o.comms > 1 || o.threads > 1 || o.idle_comms > 0) {
      throw UsageError(
          "the one-sided tests use one context; drop --comms, --threads, "
          "--idle-comms");
    }
    if (o.rma_table == "gin11" && o.runs(TestKind::get)) {
      throw UsageError("--test get: ncclGinPlugin_v11 has no iget; use --rma-table rma14");
    }
  } else if (have_rma_table) {
    throw UsageError("--rma-table applies to the one-sided tests (put, get, signal)");
  }
  if (o.raw() && have_rma_table) throw UsageError("--rma-table applies to plugins");
  if (!o.vs_raw_provider.empty() && !o.runs_transfers() && !o.runs_one_sided()) {
    throw UsageError("--vs-raw: the raw run has no reg test; add a transfer test to compare");
  }
  if (o.mem == MemType::cuda && (o.raw() || !o.vs_raw_provider.empty())) {
    throw UsageError(std::string("--mem cuda: ") + (o.raw() ? "--raw-ofi" : "--vs-raw") +
                     " runs on host memory only; drop it or use --mem host");
  }
  if (o.dmabuf && o.mem != MemType::cuda) {
    throw UsageError("--dmabuf registers GPU memory by dma-buf; it needs --mem cuda");
  }
  if (have_cuda_lib && o.mem != MemType::cuda) {
    throw UsageError("--cuda-lib applies to --mem cuda");
  }
  // reg's sweep: what was given, else its own defaults (the smallest not
  // above the largest).
  o.reg_max_bytes = have_max ? o.max_bytes : kRegMaxBytes;
  o.reg_min_bytes = have_min ? o.min_bytes : std::min(kRegMinBytes, o.reg_max_bytes);
  o.reg_step_factor = have_step ? o.step_factor : kRegStepFactor;
  if (o.runs(TestKind::reg) && o.reg_max_bytes == 0) {
    throw UsageError("--test reg registers buffers of at least 1 byte; raise --max-bytes");
  }
  return o;
}

}  // namespace weft::perf
