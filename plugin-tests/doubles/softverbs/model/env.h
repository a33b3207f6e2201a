// The environment softverbs is configured by, and its optional log.
#pragma once

#include <string>
#include <vector>

namespace softverbs {

long env_long(const char* name, long fallback);
std::string env_string(const char* name, const std::string& fallback);
std::vector<std::string> split(const std::string& text, char separator);
// SOFTVERBS_LOG=1: a line on stderr per control-path event.
void log(const char* format, ...) __attribute__((format(printf, 1, 2)));
// SOFTVERBS_LOG=2: also a line per data-path event (SRD WRs sent and
// received).
void trace(const char* format, ...) __attribute__((format(printf, 1, 2)));

}  // namespace softverbs
