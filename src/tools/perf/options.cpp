#include "options.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>

#include "errors.h"

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

}  // namespace

std::optional<size_t> parse_size(std::string_view text) {
  size_t digits = 0;
  while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9') ++digits;
  if (digits == 0 || digits > 19) return std::nullopt;
  size_t value = 0;
  for (size_t i = 0; i < digits; ++i) value = value * 10 + static_cast<size_t>(text[i] - '0');
  std::string_view suffix = text.substr(digits);
  unsigned shift = 0;
  if (!suffix.empty()) {
    switch (suffix[0]) {
      case 'k':
      case 'K':
        shift = 10;
        break;
      case 'm':
      case 'M':
        shift = 20;
        break;
      case 'g':
      case 'G':
        shift = 30;
        break;
      case 't':
      case 'T':
        shift = 40;
        break;
      case 'b':
      case 'B':
        shift = 0;
        break;
      default:
        return std::nullopt;
    }
    std::string_view rest = suffix.substr(1);
    if (shift != 0 && rest != "" && rest != "B" && rest != "iB" && rest != "b") return std::nullopt;
    if (shift == 0 && !rest.empty()) return std::nullopt;
  }
  if (shift != 0 && value > (std::numeric_limits<size_t>::max() >> shift)) return std::nullopt;
  return value << shift;
}

std::string format_size(size_t bytes) {
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
  return R"(weft-perf: point-to-point latency and bandwidth of an ncclNet plugin (or of a
libfabric provider directly), driven through the plugin ABI exactly as NCCL does.

Usage:
  weft-perf [--local] [options]                 two ranks forked on this host (default)
  weft-perf --server [--port P] [options]        rank 0, waits for a client
  weft-perf --client HOST [--port P] [options]   rank 1, connects to the server
The client takes the test parameters (tests, sizes, iterations, depth, checking)
from the server; transport options (--plugin/--abi/--dev or --raw-ofi/--domain)
are per host but both sides must use the same kind of transport.

Transport:
  --plugin PATH        ncclNet plugin to load (default:
                       )" +
         default_plugin +
         R"()
  --abi N              ncclNetPlugin_vN to use, 6..12 (default: newest exported)
  --dev N              plugin device index (default 0). The plugin picks its
                       libfabric provider/domain from its environment, e.g.
                       WEFT_OFI_PROVIDER=tcp WEFT_OFI_DOMAIN=lo
  --raw-ofi PROVIDER   bypass the plugin: run the same patterns on a libfabric
                       FI_EP_RDM endpoint with fi_tsend/fi_trecv, e.g. "tcp",
                       "tcp;ofi_rxm", "shm" (the provider ceiling)
  --domain NAME        raw mode only: libfabric domain, e.g. "lo" for tcp

Ranks and bootstrap (a TCP connection carrying handles and control words):
  --local              fork two ranks on this host over 127.0.0.1
  --server             be rank 0 and listen on --port
  --client HOST        be rank 1 and connect to HOST:--port
  --port P             bootstrap TCP port (default 18515)
  --timeout S          seconds to wait for the peer to connect, and for any
                       progress during a test (default 30)

Tests:
  --test T             latency | bw | all (default all)
                       latency: ping-pong, one message in flight, reports the
                         half round trip (min, median, average, p99; the
                         average is what fi_pingpong's usec/xfer shows)
                       bw: unidirectional, rank 0 sends, rank 1 posts receives,
                         up to --depth requests in flight; time runs from the
                         first send to the receiver's 8-byte acknowledgement
  --min-bytes S        smallest message (default 8)
  --max-bytes S        largest message (default 256M)
  --step-factor F      size multiplier between steps (default 2)
  --iters N            timed iterations per size (default 1000)
  --warmup N           untimed iterations before each size (default 10)
  --iter-bytes S       cap iterations so that iters * size <= S, at least 4
                       iterations (default 4G; 0: no cap). Warmup shrinks along.
  --depth N            bw: requests in flight per comm, 1..1024 (default 32)
  --buffer-bytes S     per rank and direction: memory for distinct message
                       slots, up to --depth slots of each size, at least one
                       (default 4M, like NCCL's 4 MiB NCCL_BUFFSIZE: the working
                       set, hence cache behaviour, resembles NCCL's)
  --no-check           do not verify received bytes
                       (default: every receive slot is filled with a pattern
                       keyed by sender, size and slot; after the timed loop of
                       each size every byte of every slot is checked, and every
                       completion's size is checked inside the loop)
Sizes take K, M, G, T suffixes (binary: 64K = 65536).

Output (stdout; progress and errors go to stderr):
  --csv                CSV instead of the table
  --json               one JSON document instead of the table
  --quiet              no progress lines on stderr
  -h, --help           this text

Exit status: 0 success, 1 run-time error or data mismatch, 2 bad command line.
)";
}

std::optional<Options> parse_options(int argc, char** argv, const std::string& default_plugin) {
  Options o;
  o.plugin_path = default_plugin;
  bool have_server = false;
  bool have_client = false;
  bool have_local = false;
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
      std::string t = next();
      if (t == "latency") {
        o.run_latency = true;
        o.run_bw = false;
      } else if (t == "bw") {
        o.run_latency = false;
        o.run_bw = true;
      } else if (t == "all") {
        o.run_latency = o.run_bw = true;
      } else {
        throw UsageError("--test expects latency, bw or all; got '" + t + "'");
      }
    } else if (arg == "--min-bytes") {
      o.min_bytes = size_arg(arg, next());
    } else if (arg == "--max-bytes") {
      o.max_bytes = size_arg(arg, next());
    } else if (arg == "--step-factor") {
      std::string f = next();
      char* end = nullptr;
      o.step_factor = strtod(f.c_str(), &end);
      if (end == f.c_str() || *end != '\0' || !(o.step_factor > 1.0) || o.step_factor > 1024) {
        throw UsageError("--step-factor expects a number in (1, 1024], got '" + f + "'");
      }
    } else if (arg == "--iters") {
      o.iters = int_in_range(arg, next(), 1, 100000000);
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
    } else {
      throw UsageError("unknown option '" + std::string(argv[i]) + "' (see --help)");
    }
  }
  if (int(have_local) + int(have_server) + int(have_client) > 1) {
    throw UsageError("--local, --server and --client exclude each other");
  }
  o.role = have_server ? Role::server : have_client ? Role::client : Role::local;
  if (o.min_bytes == 0) throw UsageError("--min-bytes must be at least 1");
  if (o.min_bytes > o.max_bytes) throw UsageError("--min-bytes is larger than --max-bytes");
  if (o.role == Role::client && o.host.empty()) throw UsageError("--client needs a host");
  if (o.raw() && o.abi != 0) throw UsageError("--abi applies to plugins, not to --raw-ofi");
  if (!o.raw() && !o.domain.empty()) {
    throw UsageError("--domain applies to --raw-ofi; the plugin reads WEFT_OFI_DOMAIN");
  }
  return o;
}

}  // namespace weft::perf
