// Fixed-capacity array whose storage is allocated a chunk at a time, on
// first use of an index in that chunk: per-comm state sized for the busiest
// comm costs an idle one only its first chunk (10^4 comms per process).
// Elements never move once allocated. Not thread-safe: a caller that
// reads from another thread serialises ensure() with those reads.
#pragma once

#include <array>
#include <cstddef>
#include <memory>
#include <new>

namespace weft {

template <typename T, size_t Capacity, size_t ChunkSize>
class ChunkedArray {
  static_assert(ChunkSize > 0 && Capacity % ChunkSize == 0);

 public:
  static constexpr size_t kChunks = Capacity / ChunkSize;

  // The element, or nullptr when its chunk is not allocated (or the index
  // is out of range: a peer's corrupt index lands here).
  T* find(size_t index) {
    if (index >= Capacity) return nullptr;
    T* chunk = chunks_[index / ChunkSize].get();
    return chunk == nullptr ? nullptr : chunk + index % ChunkSize;
  }
  // Allocates the element's chunk (value-initialised) if needed; nullptr
  // when out of range or out of memory.
  T* ensure(size_t index) {
    if (index >= Capacity) return nullptr;
    std::unique_ptr<T[]>& chunk = chunks_[index / ChunkSize];
    if (!chunk) {
      chunk.reset(new (std::nothrow) T[ChunkSize]());
      if (!chunk) return nullptr;
    }
    return chunk.get() + index % ChunkSize;
  }
  // The index of an element of an allocated chunk, or -1.
  int index_of(const T* element) const {
    for (size_t c = 0; c < kChunks; ++c) {
      const T* first = chunks_[c].get();
      if (first != nullptr && element >= first && element < first + ChunkSize)
        return static_cast<int>(c * ChunkSize + static_cast<size_t>(element - first));
    }
    return -1;
  }
  // Calls visit(T&, size_t index) for each element of the allocated chunks.
  template <typename Visit>
  void for_each_allocated(Visit visit) {
    for (size_t c = 0; c < kChunks; ++c) {
      T* chunk = chunks_[c].get();
      for (size_t i = 0; chunk != nullptr && i < ChunkSize; ++i) visit(chunk[i], c * ChunkSize + i);
    }
  }

 private:
  std::array<std::unique_ptr<T[]>, kChunks> chunks_{};
};

}  // namespace weft
