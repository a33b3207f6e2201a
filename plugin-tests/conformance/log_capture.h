// NCCL's logger hook for tests: keeps every line the plugin logs, with its
// level, so a test can check what a user would read. One thread logs (the
// tests call the plugin from one thread).
#pragma once

#include <cstdarg>
#include <cstdio>
#include <string>
#include <vector>

#include "nccl/types.h"

namespace weft::ft {

struct LoggedLine {
  ncclDebugLogLevel level;
  std::string text;
};

inline std::vector<LoggedLine>& logged_lines() {
  static std::vector<LoggedLine> lines;
  return lines;
}

// Pass to init() (or weft::set_logger) as the ncclDebugLogger_t.
inline void capture_log(ncclDebugLogLevel level, unsigned long, const char*, int, const char* fmt,
                        ...) {
  char text[2048];
  va_list args;
  va_start(args, fmt);
  std::vsnprintf(text, sizeof text, fmt, args);
  va_end(args);
  logged_lines().push_back({level, text});
}

// The captured lines of `level` (every level: NCCL_LOG_NONE), one per line.
inline std::string logged_text(ncclDebugLogLevel level = NCCL_LOG_NONE) {
  std::string out;
  for (const auto& line : logged_lines()) {
    if (level == NCCL_LOG_NONE || line.level == level) out += line.text + "\n";
  }
  return out;
}

}  // namespace weft::ft
