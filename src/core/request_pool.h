// Fixed-capacity object pool: requests are taken and returned on the data
// path without touching the allocator. Not thread-safe: each comm's pool is
// used only by the thread driving that comm's isend/irecv/test.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

namespace weft {

template <typename T, size_t Capacity>
class RequestPool {
  static_assert(Capacity > 0 && Capacity <= 65535);

 public:
  RequestPool() {
    for (size_t i = 0; i < Capacity; ++i) free_[i] = static_cast<uint16_t>(Capacity - 1 - i);
    free_count_ = Capacity;
  }
  RequestPool(const RequestPool&) = delete;
  RequestPool& operator=(const RequestPool&) = delete;

  // nullptr when every object is in use.
  T* acquire() {
    if (free_count_ == 0) return nullptr;
    uint16_t index = free_[--free_count_];
    used_[index] = true;
    return &items_[index];
  }

  // Returns false (and changes nothing) for a pointer not from this pool or
  // already free, so a double release cannot corrupt the free list.
  bool release(T* item) {
    if (!owns(item)) return false;
    auto index = static_cast<uint16_t>(item - items_.data());
    if (!used_[index]) return false;
    used_[index] = false;
    free_[free_count_++] = index;
    return true;
  }

  bool owns(const T* item) const {
    return item >= items_.data() && item < items_.data() + Capacity;
  }
  bool is_used(const T* item) const {
    return owns(item) && used_[static_cast<size_t>(item - items_.data())];
  }
  size_t in_use() const { return Capacity - free_count_; }
  T* at(size_t index) { return &items_[index]; }

 private:
  std::array<T, Capacity> items_{};
  std::array<uint16_t, Capacity> free_{};
  std::array<bool, Capacity> used_{};
  size_t free_count_ = 0;
};

}  // namespace weft
