// Watches a polling loop: a peer that died (bootstrap EOF or error message)
// or no completion for --timeout seconds ends the run instead of spinning
// forever. Cheap enough for the hot loop: the clock is read every 16K idle
// polls only.
#pragma once

#include <chrono>
#include <string>

#include "bootstrap.h"
#include "errors.h"

namespace weft::perf {

class ProgressWatch {
 public:
  ProgressWatch(Bootstrap& boot, int timeout_s) : boot_(boot), timeout_(timeout_s) { reset(); }

  void reset() {
    last_ = std::chrono::steady_clock::now();
    progressed_ = false;
  }
  void progressed() { progressed_ = true; }
  void idle(const char* what) {
    if ((++spins_ & 0x3fff) == 0) slow_check(what);
  }

 private:
  void slow_check(const char* what) {
    boot_.check_peer();
    auto now = std::chrono::steady_clock::now();
    if (progressed_) {
      last_ = now;
      progressed_ = false;
    } else if (now - last_ > timeout_) {
      throw PerfError(std::string("no progress for ") + std::to_string(timeout_.count()) +
                      " s while " + what + " (peer " + boot_.peer() +
                      " stuck or unreachable? see --timeout)");
    }
  }

  Bootstrap& boot_;
  std::chrono::seconds timeout_;
  std::chrono::steady_clock::time_point last_;
  bool progressed_ = false;
  unsigned spins_ = 0;
};

}  // namespace weft::perf
