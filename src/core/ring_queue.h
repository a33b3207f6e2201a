// A FIFO of trivially copyable items in a power-of-two ring that doubles
// when full: after its high-water mark, pushing and popping never touch
// the allocator. Not thread-safe.
#pragma once

#include <cstddef>
#include <memory>
#include <type_traits>

namespace weft {

template <typename T>
class RingQueue {
  static_assert(std::is_trivially_copyable_v<T>);

 public:
  bool empty() const { return head_ == tail_; }
  size_t size() const { return tail_ - head_; }
  T& front() { return items_[head_ & mask_]; }
  void pop() { ++head_; }
  void push(const T& item) {
    if (size() == capacity_) grow();
    items_[tail_++ & mask_] = item;
  }

 private:
  void grow() {
    size_t capacity = capacity_ == 0 ? 16 : capacity_ * 2;
    auto items = std::make_unique<T[]>(capacity);
    for (size_t i = 0; i < size(); ++i) items[i] = items_[(head_ + i) & mask_];
    tail_ = size();
    head_ = 0;
    items_ = std::move(items);
    capacity_ = capacity;
    mask_ = capacity - 1;
  }

  std::unique_ptr<T[]> items_;
  size_t capacity_ = 0;
  size_t mask_ = 0;
  size_t head_ = 0;
  size_t tail_ = 0;
};

}  // namespace weft
