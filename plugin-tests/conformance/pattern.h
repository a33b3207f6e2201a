// Byte patterns for transfer checks: every byte of a message is a function
// of (seed, offset), so lost, shifted, duplicated or misrouted data shows up.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace weft::ft {

// Seed for message `index` of stream `stream` (distinct streams and indices
// give unrelated patterns).
uint64_t pattern_seed(uint64_t stream, uint64_t index);

void fill_pattern(void* dst, size_t n, uint64_t seed);
// "" when every byte matches; otherwise names the first bad offset, the
// expected and actual byte there and how many bytes differ.
std::string check_pattern(const void* src, size_t n, uint64_t seed);

void fill_byte(void* dst, size_t n, uint8_t value);
std::string check_byte(const void* src, size_t n, uint8_t value);

// A page-aligned buffer with guard zones before and after it, filled with a
// known pattern. check_guards() reports any write outside [data, data+size).
class Buffer {
 public:
  static constexpr uint8_t kPoison = 0xCD;
  explicit Buffer(size_t size, size_t guard = 4096);
  ~Buffer();
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  Buffer(Buffer&& o) noexcept;

  uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  void poison() { fill_byte(data_, size_, kPoison); }
  std::string check_guards() const;

 private:
  uint8_t* base_ = nullptr;
  uint8_t* data_ = nullptr;
  size_t size_ = 0;
  size_t guard_ = 0;
};

}  // namespace weft::ft
