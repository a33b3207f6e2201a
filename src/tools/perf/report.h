// Output of rank 0: an aligned table like nccl-tests (default), CSV or one
// JSON document, always on stdout. Rows stream out as sizes complete (JSON
// is written at the end). A run with --vs-raw has two runs (plugin, then
// raw provider) and ends with a comparison: plugin/raw ratio per test and size.
#pragma once

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "backend.h"
#include "options.h"
#include "pattern.h"

namespace weft::perf {

struct RunResult {
  std::string label;
  Facts facts;
  std::vector<SizeResult> rows;
  Facts totals;  // known at the end of the run (--mem cuda: flush counts)
};

// The value of `key` in `facts`, or nullptr.
const std::string* fact(const Facts& facts, const char* key);

// One line of the comparison: the same test and size on both runs.
struct Ratio {
  std::string test;
  size_t size = 0;
  int group = 0;
  const char* unit = "";  // what plugin/raw are in
  double plugin = 0, raw = 0;
  double ratio = 0;  // plugin / raw
};

// Latency compares median half round trips (us), rate messages/s, the
// bandwidth tests GB/s.
std::vector<Ratio> compare_runs(const RunResult& plugin, const RunResult& raw);

class Reporter {
 public:
  virtual ~Reporter() = default;
  virtual void begin_run(const std::string& label, const Facts& facts) = 0;
  virtual void section(const Pattern& pattern, const Options& opts) = 0;
  virtual void row(const SizeResult& r) = 0;
  virtual void end_run(const RunResult& run) = 0;
  virtual void comparison(const RunResult& plugin, const RunResult& raw) = 0;
  virtual void end() = 0;
};

std::unique_ptr<Reporter> make_reporter(OutputFormat format, FILE* out, const Options& opts);

}  // namespace weft::perf
