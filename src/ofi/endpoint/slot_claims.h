// Indices 0..kSlots-1 that any thread claims and releases without a lock:
// shared buffers of an endpoint used by every comm's thread.
#pragma once

#include <atomic>
#include <bit>
#include <cstddef>
#include <cstdint>

namespace weft {

template <size_t kSlots>
class SlotClaims {
  static_assert(kSlots > 0 && kSlots % 64 == 0, "whole 64-bit words");

 public:
  // The lowest free index below `limit` (at most kSlots), now claimed; -1
  // when every one of them is.
  int claim(size_t limit) {
    for (size_t word = 0; word * 64 < limit && word < kWords; ++word) {
      const size_t left = limit - word * 64;
      const uint64_t usable = left >= 64 ? ~uint64_t{0} : (uint64_t{1} << left) - 1;
      uint64_t bits = words_[word].load(std::memory_order_relaxed);
      while ((bits & usable) != usable) {
        const int bit = std::countr_zero(~bits & usable);
        // Acquire: whoever released it is done with what the index names.
        if (words_[word].compare_exchange_weak(bits, bits | (uint64_t{1} << bit),
                                               std::memory_order_acquire,
                                               std::memory_order_relaxed)) {
          return static_cast<int>(word * 64) + bit;
        }
      }
    }
    return -1;
  }

  void release(int index) {
    words_[static_cast<size_t>(index) / 64].fetch_and(~(uint64_t{1} << (index % 64)),
                                                      std::memory_order_release);
  }

  bool claimed(int index) const {
    return (words_[static_cast<size_t>(index) / 64].load(std::memory_order_acquire) >>
            (index % 64)) &
           1;
  }

  size_t count() const {
    size_t n = 0;
    for (const auto& word : words_) n += std::popcount(word.load(std::memory_order_relaxed));
    return n;
  }

 private:
  static constexpr size_t kWords = kSlots / 64;
  std::atomic<uint64_t> words_[kWords] = {};
};

}  // namespace weft
