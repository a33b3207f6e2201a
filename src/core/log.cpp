#include "weft/log.h"

#include <atomic>
#include <cstdarg>
#include <cstdio>

namespace weft {
namespace {

std::atomic<ncclDebugLogger_t> nccl_logger{nullptr};
std::atomic<int> stderr_level{NCCL_LOG_WARN};

}  // namespace

const char* log_level_name(ncclDebugLogLevel level) {
  switch (level) {
    case NCCL_LOG_WARN:
      return "WARN";
    case NCCL_LOG_INFO:
      return "INFO";
    case NCCL_LOG_TRACE:
      return "TRACE";
    default:
      return "LOG";
  }
}

void set_logger(ncclDebugLogger_t logger) {
  nccl_logger.store(logger, std::memory_order_release);
}

void set_stderr_level(ncclDebugLogLevel level) {
  stderr_level.store(level);
}

bool log_enabled(ncclDebugLogLevel level) {
  // NCCL filters by NCCL_DEBUG itself; we only skip formatting for stderr.
  if (nccl_logger.load(std::memory_order_acquire) != nullptr) return true;
  return level <= stderr_level.load(std::memory_order_relaxed) && level != NCCL_LOG_NONE;
}

void log_message(ncclDebugLogLevel level, unsigned long flags, const char* file, int line,
                 const char* fmt, ...) {
  char text[1024];
  va_list args;
  va_start(args, fmt);
  vsnprintf(text, sizeof(text), fmt, args);
  va_end(args);

  if (ncclDebugLogger_t logger = nccl_logger.load(std::memory_order_acquire)) {
    logger(level, flags, file, line, "NET/weft %s", text);
    return;
  }
  if (!log_enabled(level)) return;
  fprintf(stderr, "NET/weft %s %s\n", log_level_name(level), text);
}

}  // namespace weft
