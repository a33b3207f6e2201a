// Command line of weft-perf: what to run, where, and how to report it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace weft::perf {

enum class Role { local, server, client };
enum class OutputFormat { table, csv, json };

struct Options {
  // Transport: a plugin .so (default) or libfabric directly.
  std::string plugin_path;
  int abi = 0;               // 0: newest exported
  std::string raw_provider;  // non-empty: raw libfabric mode
  std::string domain;        // raw mode: fi_info domain name (e.g. "lo")
  int dev = 0;

  // Ranks.
  Role role = Role::local;
  std::string host;  // client: server address
  uint16_t port = 18515;
  int timeout_s = 30;

  // Tests and sweep.
  bool run_latency = true;
  bool run_bw = true;
  size_t min_bytes = 8;
  size_t max_bytes = size_t{256} << 20;
  double step_factor = 2.0;
  int iters = 1000;
  int warmup = 10;
  size_t iter_bytes = size_t{4} << 30;    // caps iters * size per size step
  size_t buffer_bytes = size_t{4} << 20;  // slots per size step (NCCL_BUFFSIZE-like)
  int depth = 32;
  bool check = true;

  // Output.
  OutputFormat format = OutputFormat::table;
  bool quiet = false;

  bool raw() const { return !raw_provider.empty(); }
};

// "8", "64K", "4M", "1G", "1T" (binary multiples; "KiB"/"KB" accepted too).
std::optional<size_t> parse_size(std::string_view text);

// Human form used in progress lines: "8 B", "64 KiB", "256 MiB".
std::string format_size(size_t bytes);

// min, min*f, ... up to max (each step at least +1 byte).
std::vector<size_t> size_sweep(size_t min_bytes, size_t max_bytes, double factor);

// Throws UsageError. Returns nullopt when --help was given (text printed).
std::optional<Options> parse_options(int argc, char** argv, const std::string& default_plugin);

std::string usage_text(const std::string& default_plugin);

}  // namespace weft::perf
