#include "health.h"

#include <cstdio>
#include <cstdlib>

namespace weft::perf {
namespace {

std::string number(const char* format, double value) {
  char text[64];
  std::snprintf(text, sizeof(text), format, value);
  return text;
}

}  // namespace

HealthVerdict judge_health(const RunResult& run, const Options& opts) {
  HealthVerdict verdict;
  std::vector<std::string> failed;
  const SizeResult* latency = nullptr;
  const SizeResult* bandwidth = nullptr;
  for (const SizeResult& row : run.rows) {
    if (row.test == "latency" && (latency == nullptr || row.size < latency->size)) latency = &row;
    if (row.test == "bw" && (bandwidth == nullptr || row.size > bandwidth->size)) bandwidth = &row;
  }

  if (bandwidth != nullptr) {
    const std::string* speed = fact(run.facts, "speed_mbps");
    const int speed_mbps = speed != nullptr ? std::atoi(speed->c_str()) : 0;
    double needed = 0;
    std::string basis;
    if (opts.health_min_gbps > 0) {
      needed = opts.health_min_gbps;
      basis = "--health-min-gbps";
    } else if (speed_mbps > 0) {
      const double line_rate = speed_mbps / 8000.0;  // GB/s
      needed = line_rate * opts.health_min_fraction;
      basis = number("%.0f%%", 100 * opts.health_min_fraction) + " of the device's " +
              number("%.2f GB/s", line_rate) + " (" + std::to_string(speed_mbps) + " Mb/s)";
    }
    std::string line = "health: bandwidth " + number("%.2f GB/s", bandwidth->gbps) + " at " +
                       readable_size(bandwidth->size) + " over " + std::to_string(opts.comms) +
                       " comm(s)";
    if (needed <= 0) {
      line += ": the device reports no speed; give --health-min-gbps";
      failed.push_back("no bandwidth threshold");
    } else {
      const bool ok = bandwidth->gbps >= needed;
      line += std::string(ok ? " >= " : " < ") + number("%.2f GB/s", needed) + " (" + basis + ")";
      if (!ok) failed.push_back("bandwidth");
    }
    verdict.lines.push_back(line);
  }

  if (latency != nullptr) {
    std::string line = "health: latency " + number("%.2f us", latency->median_us) + " median, " +
                       number("%.2f us", latency->p99_us) + " p99 at " +
                       readable_size(latency->size);
    if (opts.health_max_latency_us > 0) {
      const bool ok = latency->median_us <= opts.health_max_latency_us;
      line += std::string(ok ? " <= " : " > ") + number("%.2f us", opts.health_max_latency_us) +
              " (--health-max-latency-us)";
      if (!ok) failed.push_back("latency");
    } else {
      line += " (not judged: no --health-max-latency-us)";
    }
    verdict.lines.push_back(line);
  }

  verdict.pass = failed.empty();
  std::string last = "health: " + std::string(verdict.pass ? "PASS" : "FAIL");
  if (!verdict.pass) {
    last += " (";
    for (size_t i = 0; i < failed.size(); ++i) last += (i ? ", " : "") + failed[i];
    last += ")";
  }
  if (const std::string* device = fact(run.facts, "device")) last += " " + *device;
  verdict.lines.push_back(last);
  return verdict;
}

}  // namespace weft::perf
