// Object pool for requests, grown lazily in chunks up to a fixed capacity:
// a comm that never has more than a few requests in flight holds only one
// chunk (10^4 mostly idle comms per process), and a busy one allocates at
// most Capacity / ChunkSize times in its life, each time its in-flight
// count passes a new high-water mark; after that, requests are taken and
// returned without touching the allocator. Objects never move, so their
// addresses can be handed to the provider, and index_of() is stable.
// Not thread-safe: each comm's pool is used only by the thread driving
// that comm's isend/irecv/test.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

#include "core/chunked_array.h"

namespace weft {

template <typename T, size_t Capacity, size_t ChunkSize = 8>
class RequestPool {
  static_assert(Capacity > 0 && Capacity <= 65535);
  static_assert(ChunkSize > 0 && Capacity % ChunkSize == 0);
  static constexpr size_t kChunks = Capacity / ChunkSize;

 public:
  RequestPool() = default;
  RequestPool(const RequestPool&) = delete;
  RequestPool& operator=(const RequestPool&) = delete;

  // nullptr when every object is in use, or a new chunk could not be
  // allocated.
  T* acquire() {
    if (free_count_ == 0 && !grow()) return nullptr;
    uint16_t index = free_[--free_count_];
    used_[index] = true;
    return item(index);
  }

  // Returns false (and changes nothing) for a pointer not from this pool or
  // already free, so a double release cannot corrupt the free list.
  bool release(T* object) {
    int index = index_of(object);
    if (index < 0 || !used_[static_cast<size_t>(index)]) return false;
    used_[static_cast<size_t>(index)] = false;
    free_[free_count_++] = static_cast<uint16_t>(index);
    return true;
  }

  // The object's stable index (0 .. Capacity-1), or -1 when not from this pool.
  int index_of(const T* object) const { return items_.index_of(object); }
  bool is_used(const T* object) const {
    int index = index_of(object);
    return index >= 0 && used_[static_cast<size_t>(index)];
  }
  size_t in_use() const { return allocated() - free_count_; }
  // Objects allocated so far (whole chunks).
  size_t allocated() const { return chunk_count_ * ChunkSize; }
  // Calls visit(T&) for each object handed out and not yet released.
  template <typename Visit>
  void for_each_in_use(Visit visit) {
    for (size_t i = 0; i < allocated(); ++i)
      if (used_[i]) visit(*item(i));
  }
  // Whether test(T&) holds for any object handed out and not yet released.
  template <typename Test>
  bool any_in_use(Test test) {
    for (size_t i = 0; i < allocated(); ++i)
      if (used_[i] && test(*item(i))) return true;
    return false;
  }

 private:
  T* item(size_t index) { return items_.find(index); }

  bool grow() {
    if (chunk_count_ == kChunks) return false;
    if (items_.ensure(chunk_count_ * ChunkSize) == nullptr) return false;
    // Lowest index on top: a fresh pool hands out 0, 1, 2, ...
    size_t first = chunk_count_ * ChunkSize;
    for (size_t i = ChunkSize; i-- > 0;) free_[free_count_++] = static_cast<uint16_t>(first + i);
    ++chunk_count_;
    return true;
  }

  ChunkedArray<T, Capacity, ChunkSize> items_;
  std::array<uint16_t, Capacity> free_{};
  std::array<bool, Capacity> used_{};
  size_t chunk_count_ = 0;
  size_t free_count_ = 0;
};

}  // namespace weft
