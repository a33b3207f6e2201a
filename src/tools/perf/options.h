// Command line of weft-perf: what to run, where, and how to report it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "job_graph.h"
#include "launcher.h"

namespace weft::perf {

enum class Role { local, server, client };
enum class OutputFormat { table, csv, json };
// Raw libfabric operation: tagged messages, or RMA writes with remote CQ data.
enum class RawOp { tagged, write };

// Message memory: host (NCCL_PTR_HOST) or GPU 0 through the CUDA driver
// (NCCL_PTR_CUDA).
enum class MemType { host, cuda };

// The tests weft-perf can run, in report order. reg measures registration
// (regMr/deregMr), not transfers. put, get and signal are one-sided: the
// plugin's RMA table (ncclRmaPlugin_vN / ncclGinPlugin_vN), or fi_write /
// fi_read / fi_writedata on the raw provider.
enum class TestKind { latency, bw, bibw, rate, grouped, reg, put, get, signal };
inline constexpr TestKind kAllTests[] = {TestKind::latency, TestKind::bw,      TestKind::bibw,
                                         TestKind::rate,    TestKind::grouped, TestKind::reg,
                                         TestKind::put,     TestKind::get,     TestKind::signal};
// What `--test one-sided` selects.
inline constexpr TestKind kOneSidedTests[] = {TestKind::put, TestKind::get, TestKind::signal};
// What `--test all` selects: every transfer test. reg is left out (its
// sweep runs to 1 GiB and about 2 s per size); ask for it by name.
inline constexpr TestKind kTransferTests[] = {TestKind::latency, TestKind::bw, TestKind::bibw,
                                              TestKind::rate, TestKind::grouped};
const char* test_name(TestKind t);
// Two-sided messages (not reg, not one-sided).
bool is_transfer_test(TestKind t);
bool is_one_sided_test(TestKind t);

// Defaults of the reg sweep where --min-bytes/--max-bytes/--step-factor are
// not given: 4 KiB .. 1 GiB, x4.
inline constexpr size_t kRegMinBytes = size_t{4} << 10;
inline constexpr size_t kRegMaxBytes = size_t{1} << 30;
inline constexpr double kRegStepFactor = 4.0;

struct Options {
  // Backend: a plugin .so (default) or libfabric directly.
  std::string plugin_path;
  int abi = 0;               // 0: newest exported
  std::string raw_provider;  // non-empty: raw libfabric mode
  std::string domain;        // raw mode: fi_info domain name (e.g. "lo")
  std::string fabric;        // raw mode: fi_info fabric name (e.g. "efa-direct")
  RawOp raw_op = RawOp::tagged;
  // Plugin mode: also run the raw provider in the same run and report
  // plugin/raw ratios.
  std::string vs_raw_provider;
  int dev = 0;
  // One-sided tests: which of the plugin's tables (rma14, rma13, gin13,
  // gin12, gin11; weft::RmaClient names).
  std::string rma_table = "rma14";

  // Ranks.
  Role role = Role::local;
  std::string host;  // client: server address
  uint16_t port = 18515;
  int timeout_s = 30;
  std::string launcher;  // "mpirun"/"srun" when the role came from its variables

  // Job mode (--job, job_run.h): N ranks, each with the comms of a pattern.
  std::vector<JobPattern> jobs;          // empty: the two-rank tests
  int ranks = 2;                         // --ranks, or the launcher's job size
  int rank = 0;                          // this process's rank (server 0)
  int channels = 1;                      // --channels
  size_t job_bytes = size_t{256} << 10;  // --max-bytes in job mode
  int job_iters = 20;                    // --iters in job mode
  // Bounds rank 0 judges (0: reported only): memory per comm at its
  // high-water mark, fds per peer rank at theirs.
  double job_max_kib_per_comm = 0;
  double job_max_fds_per_peer = 0;
  // A rank that kills itself (SIGKILL) once the handles are exchanged,
  // before it connects or accepts (-1: none): the others must fail naming it.
  int job_kill_rank = -1;

  // Tests and sweep.
  std::vector<TestKind> tests = {TestKind::latency, TestKind::bw};
  size_t min_bytes = 8;
  size_t max_bytes = size_t{256} << 20;
  double step_factor = 2.0;
  int iters = 1000;
  int warmup = 10;
  size_t iter_bytes = size_t{4} << 30;    // caps iters * size per size step
  size_t buffer_bytes = size_t{4} << 20;  // slots per size step (NCCL_BUFFSIZE-like)
  int depth = 32;
  int comms = 1;       // channels to the peer (NCCL: one comm pair per channel)
  int idle_comms = 0;  // more comm pairs, open and idle through the run (plugin only)
  int threads = 1;     // threads driving them, comm c on thread c % threads
  int group = 0;       // grouped: receives per request; 0 = 1, 2, 4 .. maxRecvs
  size_t rate_max_bytes = size_t{64} << 10;  // rate: largest size measured
  bool check = true;
  // reg: its own sweep (the --min-bytes/--max-bytes/--step-factor given, else
  // kRegMinBytes .. kRegMaxBytes by kRegStepFactor).
  size_t reg_min_bytes = kRegMinBytes;
  size_t reg_max_bytes = kRegMaxBytes;
  double reg_step_factor = kRegStepFactor;

  // Memory.
  MemType mem = MemType::host;
  std::string cuda_lib = "libcuda.so.1";  // --mem cuda: the driver library to load
  bool dmabuf = false;                    // --mem cuda: register with regMrDmaBuf

  // Output.
  OutputFormat format = OutputFormat::table;
  bool quiet = false;
  std::string samples_path;  // latency: every timed iteration, as CSV (rank 0)

  // --health: the latency at the smallest size and the bandwidth at the
  // largest judged against thresholds (health.h); the verdict on stderr and
  // in the exit status. Rank 0 judges.
  bool health = false;
  double health_min_fraction = 0.7;  // of the device's reported speed
  double health_min_gbps = 0;        // GB/s; replaces the fraction when > 0
  double health_max_latency_us = 0;  // 0: latency reported, not judged

  bool raw() const { return !raw_provider.empty(); }
  bool job() const { return !jobs.empty(); }
  bool runs(TestKind t) const;
  bool runs_transfers() const;  // any two-sided message test
  bool runs_one_sided() const;  // put, get or signal
};

// Sizes on the command line are read by weft::parse_size
// (weft/param_parse.h), as the plugin reads its parameters: "8", "64K",
// "4M", "1G", "1T", "4MiB", "4MB".

// Report text for people, with a space and an IEC unit ("8 B", "64 KiB",
// "256 MiB"); weft::format_size writes the parameter form ("64K").
std::string readable_size(size_t bytes);

// min, min*f, ... up to max (each step at least +1 byte).
std::vector<size_t> size_sweep(size_t min_bytes, size_t max_bytes, double factor);

// Throws UsageError. Returns nullopt when --help was given (text printed).
// `env` looks up launcher variables (mpirun/srun ranks); tests pass a fake.
std::optional<Options> parse_options(int argc, char** argv, const std::string& default_plugin,
                                     EnvLookup env = nullptr);

std::string usage_text(const std::string& default_plugin);

}  // namespace weft::perf
