// Output of rank 0: an aligned table like nccl-tests (default), CSV or one
// JSON document, always on stdout. Rows stream out as sizes complete (JSON
// is written at the end).
#pragma once

#include <cstdio>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "options.h"
#include "pattern.h"

namespace weft::perf {

using Facts = std::vector<std::pair<std::string, std::string>>;

class Reporter {
 public:
  virtual ~Reporter() = default;
  virtual void begin(const Facts& facts) = 0;
  virtual void section(const Pattern& pattern, const Options& opts) = 0;
  virtual void row(const SizeResult& r) = 0;
  virtual void end() = 0;
};

std::unique_ptr<Reporter> make_reporter(OutputFormat format, FILE* out);

}  // namespace weft::perf
