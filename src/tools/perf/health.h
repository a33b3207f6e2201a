// weft-perf --health: a pass/fail verdict for a node pair from one run:
// bandwidth at the largest size against what the device reports (or a
// given figure), latency at the smallest size against an optional limit.
#pragma once

#include <string>
#include <vector>

#include "options.h"
#include "report.h"

namespace weft::perf {

struct HealthVerdict {
  bool pass = false;
  std::vector<std::string> lines;  // "health: ..." lines for stderr, the verdict last
};

HealthVerdict judge_health(const RunResult& run, const Options& opts);

// Exit status of a failed check (0 pass, 1 error, 2 usage).
constexpr int kHealthFailedStatus = 3;

}  // namespace weft::perf
