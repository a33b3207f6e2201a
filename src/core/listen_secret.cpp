#include "core/listen_secret.h"

#include <cerrno>
#include <chrono>
#include <cstring>
#include <mutex>

#include "core/random.h"
#include "weft/log.h"

namespace weft {

bool fresh_listen_secret(uint64_t* out) {
  if (kernel_random_nonzero_u64(out)) return true;
  WEFT_WARN("no listen secret: getrandom failed (%s); refusing to listen with a guessable one",
            std::strerror(errno));
  return false;
}

bool listen_secret_matches(uint64_t expected, uint64_t presented) {
  // No early exit: every bit is looked at whatever the first difference.
  volatile uint64_t difference = expected ^ presented;
  return difference == 0;
}

void log_refused_connect(const std::string& where, const std::string& from,
                         const std::string& why) {
  static std::mutex mutex;
  static std::chrono::steady_clock::time_point next_log{};
  static uint64_t unlogged = 0;
  std::lock_guard<std::mutex> lock(mutex);
  const auto now = std::chrono::steady_clock::now();
  if (now < next_log) {
    ++unlogged;
    return;
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
}

}  // namespace weft
