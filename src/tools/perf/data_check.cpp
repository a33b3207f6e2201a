#include "data_check.h"

#include <cstring>

namespace weft::perf {
namespace {

inline uint64_t mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

inline uint64_t word(uint64_t key, size_t index) {
  return mix(key + 0x9e3779b97f4a7c15ull * (static_cast<uint64_t>(index) + 1));
}

}  // namespace

uint64_t pattern_key(int sender_rank, size_t size, size_t slot) {
  return mix(mix(static_cast<uint64_t>(sender_rank) + 1) ^ mix(size) ^
             (slot * 0x632be59bd9b4e019ull));
}

void fill_pattern(void* buf, size_t size, uint64_t key) {
  fill_pattern_at(buf, size, key, 0);
}

size_t find_mismatch(const void* buf, size_t size, uint64_t key) {
  return find_mismatch_at(buf, size, key, 0);
}

void fill_pattern_at(void* buf, size_t len, uint64_t key, size_t at) {
  auto* p = static_cast<unsigned char*>(buf);
  const size_t first = at / 8;
  size_t words = len / 8;
  for (size_t i = 0; i < words; ++i) {
    uint64_t w = word(key, first + i);
    memcpy(p + i * 8, &w, 8);
  }
  if (len % 8 != 0) {
    uint64_t w = word(key, first + words);
    memcpy(p + words * 8, &w, len % 8);
  }
}

size_t find_mismatch_at(const void* buf, size_t len, uint64_t key, size_t at) {
  auto* p = static_cast<const unsigned char*>(buf);
  const size_t first = at / 8;
  size_t words = len / 8;
  // Branch-light scan in blocks; locate the exact byte only on failure.
  constexpr size_t kBlock = 64;
  for (size_t b = 0; b < words; b += kBlock) {
    size_t end = b + kBlock < words ? b + kBlock : words;
    uint64_t diff = 0;
    for (size_t i = b; i < end; ++i) {
      uint64_t w;
      memcpy(&w, p + i * 8, 8);
      diff |= w ^ word(key, first + i);
    }
    if (diff != 0) {
      for (size_t off = b * 8; off < end * 8; ++off) {
        if (p[off] != expected_byte(key, at + off)) return off;
      }
    }
  }
  for (size_t off = words * 8; off < len; ++off) {
    if (p[off] != expected_byte(key, at + off)) return off;
  }
  return SIZE_MAX;
}

uint8_t expected_byte(uint64_t key, size_t offset) {
  uint64_t w = word(key, offset / 8);
  unsigned char bytes[8];
  memcpy(bytes, &w, 8);
  return bytes[offset % 8];
}

void poison(void* buf, size_t size) {
  memset(buf, 0xa5, size);
}

}  // namespace weft::perf
