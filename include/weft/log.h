// Logging: through NCCL's logger when NCCL gave us one (flag NET, prefix
// "NET/weft"), otherwise to stderr filtered by WEFT_DEBUG.
#pragma once

#include "nccl/types.h"

namespace weft {

// Installs NCCL's logger (nullptr: back to stderr). Thread-safe.
void set_logger(ncclDebugLogger_t logger);

// stderr threshold when no NCCL logger is set (from WEFT_DEBUG).
void set_stderr_level(ncclDebugLogLevel level);

// "WARN", "INFO", "TRACE", or "LOG" for the other levels.
const char* log_level_name(ncclDebugLogLevel level);

bool log_enabled(ncclDebugLogLevel level);

// Cold: the compiler moves every path that logs (and builds its text) out
// of the hot code, which keeps the data path dense in the instruction cache.
[[gnu::cold]] void log_message(ncclDebugLogLevel level, unsigned long flags, const char* file,
                               int line, const char* fmt, ...)
    __attribute__((format(printf, 5, 6)));

}  // namespace weft

#define WEFT_WARN(...) ::weft::log_message(NCCL_LOG_WARN, NCCL_NET, __FILE__, __LINE__, __VA_ARGS__)
#define WEFT_INFO(flags, ...) \
  ::weft::log_message(NCCL_LOG_INFO, (flags) | NCCL_NET, __FILE__, __LINE__, __VA_ARGS__)
#define WEFT_TRACE(...)                                                               \
  do {                                                                                \
    if (::weft::log_enabled(NCCL_LOG_TRACE))                                          \
      ::weft::log_message(NCCL_LOG_TRACE, NCCL_NET, __FILE__, __LINE__, __VA_ARGS__); \
  } while (0)
