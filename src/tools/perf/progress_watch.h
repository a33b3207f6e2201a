// Watches a polling loop: a peer that died (bootstrap EOF or error message),
// another thread of this rank that failed, or no completion for --timeout
// seconds ends the run instead of spinning forever. Cheap enough for the hot
// loop: the clock is read every 16K idle polls only, and sched_yield is
// called only in long idle streaks.
#pragma once

#include <sched.h>

#include <atomic>
#include <chrono>
#include <string>

#include "bootstrap.h"
#include "errors.h"

namespace weft::perf {

class ProgressWatch {
 public:
  // `boot` null: do not look at the bootstrap (it belongs to another thread).
  ProgressWatch(Bootstrap* boot, int timeout_s, const std::atomic<bool>* abort = nullptr)
      : boot_(boot), timeout_(timeout_s), abort_(abort) {
    reset();
  }

  void reset() {
    last_ = std::chrono::steady_clock::now();
    progressed_ = false;
  }
  void progressed() {
    progressed_ = true;
    idle_streak_ = 0;
  }
  void idle(const char* what) {
    // A long wait on an oversubscribed host usually means the peer shares
    // our core: yield so it runs now rather than at the end of our slice.
    // Short waits (the normal case) never reach the syscall.
    if (++idle_streak_ > kSpinBeforeYield && (idle_streak_ & 63) == 0) sched_yield();
    if ((++spins_ & 0x3fff) == 0) slow_check(what);
  }

 private:
  void slow_check(const char* what) {
    if (abort_ != nullptr && abort_->load(std::memory_order_relaxed)) {
      throw PerfError("stopped: another thread of this rank failed");
    }
    if (boot_ != nullptr) boot_->check_peer();
    auto now = std::chrono::steady_clock::now();
    if (progressed_) {
      last_ = now;
      progressed_ = false;
    } else if (now - last_ > timeout_) {
      throw PerfError(std::string("no progress for ") + std::to_string(timeout_.count()) +
                      " s while " + what + " (peer " + (boot_ ? boot_->peer() : "rank") +
                      " stuck or unreachable? see --timeout)");
    }
  }

  Bootstrap* boot_;
  std::chrono::seconds timeout_;
  const std::atomic<bool>* abort_;
  std::chrono::steady_clock::time_point last_;
  bool progressed_ = false;
  unsigned spins_ = 0;
  unsigned idle_streak_ = 0;
  static constexpr unsigned kSpinBeforeYield = 4096;
};

}  // namespace weft::perf
