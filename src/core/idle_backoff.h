// How a thread waits for progress it cannot be woken for (a completion
// queue read with FI_WAIT_NONE, a peer's reply in a blocking setup step):
// a few polls back to back (most waits end there), then it yields the
// CPU, then it sleeps, each time longer, up to kMaxSleepUs. A spinning
// waiter takes the core its peers may need to make the progress it waits
// for: ranks that share cores (oversubscribed hosts, containers, CI's two
// cores running several tests). A poll still happens between pauses, so a
// wait ends at most kMaxSleepUs after what it waits for. Only for blocking
// calls (setup, close) and test harnesses: never on the data path.
#pragma once

#include <sched.h>
#include <time.h>

namespace weft {

class IdleBackoff {
 public:
  // Call after each poll that did not end the wait.
  void pause() {
    ++polls_;
    if (polls_ <= kSpinPolls) return;
    if (polls_ <= kSpinPolls + kYieldPolls) {
      sched_yield();
      return;
    }
    timespec nap{0, sleep_us_ * 1000L};
    nanosleep(&nap, nullptr);
    sleep_us_ = sleep_us_ * 2 < kMaxSleepUs ? sleep_us_ * 2 : kMaxSleepUs;
  }

  // Something happened (a request completed, a peer answered): spin again.
  void reset() {
    polls_ = 0;
    sleep_us_ = kFirstSleepUs;
  }

 private:
  static constexpr int kSpinPolls = 200;
  static constexpr int kYieldPolls = 200;
  static constexpr long kFirstSleepUs = 20;
  static constexpr long kMaxSleepUs = 500;
  int polls_ = 0;
  long sleep_us_ = kFirstSleepUs;
};

}  // namespace weft
