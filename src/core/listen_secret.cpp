#include "core/listen_secret.h"

#include <sys/random.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <mutex>

#include "weft/log.h"

namespace weft {
namespace {

std::atomic<uint64_t> refused{0};

}  // namespace

bool fresh_listen_secret(uint64_t* out) {
  uint64_t value = 0;
  while (value == 0) {
    // Blocks only until the kernel's pool is first initialised, at boot.
    ssize_t got = getrandom(&value, sizeof(value), 0);
    if (got == static_cast<ssize_t>(sizeof(value))) continue;
    if (got < 0 && errno == EINTR) continue;
    WEFT_WARN("no listen secret: getrandom failed (%s); refusing to listen with a guessable one",
              got < 0 ? std::strerror(errno) : "short read");
    return false;
  }
  *out = value;
  return true;
}

bool listen_secret_matches(uint64_t expected, uint64_t presented) {
  // No early exit: every bit is looked at whatever the first difference.
  volatile uint64_t difference = expected ^ presented;
  return difference == 0;
}

uint64_t log_refused_connect(const std::string& where, const std::string& from,
                             const std::string& why) {
  static std::mutex mutex;
  static std::chrono::steady_clock::time_point next_log{};
  static uint64_t unlogged = 0;
  const uint64_t count = refused.fetch_add(1, std::memory_order_relaxed) + 1;
  std::lock_guard<std::mutex> lock(mutex);
  const auto now = std::chrono::steady_clock::now();
  if (now < next_log) {
    ++unlogged;
    return count;
  }
  next_log = now + std::chrono::seconds(1);
  const std::string more =
      unlogged > 0 ? "; " + std::to_string(unlogged) + " more refused since the last such warning"
                   : "";
  WEFT_WARN("%s: refused a connect from %s: %s (docs/security.md%s)", where.c_str(), from.c_str(),
            why.empty() ? "it did not present the listen handle's secret: a stale handle, or "
                          "someone who was never handed it"
                        : why.c_str(),
            more.c_str());
  unlogged = 0;
  return count;
}

uint64_t refused_connects() {
  return refused.load(std::memory_order_relaxed);
}

}  // namespace weft
