// A clear-to-send group in the send comm's FIFO that reads as invalid may
// be a write still landing: rxe (and any NIC whose write is not seen all at
// once) can show an entry's sequence before the count that follows it, 0 in
// a slot never used. Such a read settles within microseconds; a peer's bad
// entry stays. So a group fails the comm only once it has read as invalid
// for the whole grace.
#pragma once

#include <chrono>
#include <cstdint>

namespace weft::verbs {

class InvalidCtsGrace {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr Clock::duration kGrace = std::chrono::milliseconds(50);

  // True while the group of `sequence`, invalid since its first such read,
  // may still be settling.
  bool settling(uint32_t sequence, Clock::time_point now) {
    if (!seen_ || sequence_ != sequence) {
      seen_ = true;
      sequence_ = sequence;
      since_ = now;
    }
    return now - since_ < kGrace;
  }
  // The group read as valid.
  void clear() { seen_ = false; }

 private:
  bool seen_ = false;
  uint32_t sequence_ = 0;
  Clock::time_point since_{};
};

}  // namespace weft::verbs
