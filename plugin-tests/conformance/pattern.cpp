#include "pattern.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <sstream>

namespace weft::ft {
namespace {

inline uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

inline uint8_t pattern_byte(uint64_t seed, size_t off) {
  return static_cast<uint8_t>(mix(seed ^ ((off / 8) * 0xd6e8feb86659fd93ull)) >> (8 * (off % 8)));
}

constexpr uint64_t kGuardSeed = 0x6775617264ull;

std::string describe(size_t n, size_t first, uint8_t want, uint8_t got, size_t bad) {
  std::ostringstream os;
  os << "first bad byte at offset " << first << " of " << n << ": expected 0x" << std::hex
     << int(want) << " got 0x" << int(got) << std::dec << " (" << bad << " bad bytes)";
  return os.str();
}

}  // namespace

uint64_t pattern_seed(uint64_t stream, uint64_t index) {
  return mix(mix(stream) ^ (index + 1) * 0x2545f4914f6cdd1dull);
}

void fill_pattern(void* dst, size_t n, uint64_t seed) {
  auto* p = static_cast<uint8_t*>(dst);
  size_t words = n / 8;
  for (size_t w = 0; w < words; ++w) {
    uint64_t v = mix(seed ^ (w * 0xd6e8feb86659fd93ull));
    std::memcpy(p + 8 * w, &v, 8);  // little-endian: byte k of word = v >> 8k
  }
  for (size_t off = words * 8; off < n; ++off) p[off] = pattern_byte(seed, off);
}

std::string check_pattern(const void* src, size_t n, uint64_t seed) {
  const auto* p = static_cast<const uint8_t*>(src);
  size_t words = n / 8;
  size_t w = 0;
  for (; w < words; ++w) {  // fast path, word at a time
    uint64_t v = mix(seed ^ (w * 0xd6e8feb86659fd93ull));
    if (std::memcmp(p + 8 * w, &v, 8) != 0) break;
  }
  size_t start = w * 8;
  size_t first = n, bad = 0;
  uint8_t want = 0, got = 0;
  for (size_t off = start; off < n; ++off) {
    uint8_t e = pattern_byte(seed, off);
    if (p[off] != e) {
      if (bad++ == 0) {
        first = off;
        want = e;
        got = p[off];
      }
    }
  }
  return bad ? describe(n, first, want, got, bad) : std::string();
}

void fill_byte(void* dst, size_t n, uint8_t value) {
  std::memset(dst, value, n);
}

std::string check_byte(const void* src, size_t n, uint8_t value) {
  const auto* p = static_cast<const uint8_t*>(src);
  size_t first = n, bad = 0;
  for (size_t i = 0; i < n; ++i) {
    if (p[i] != value && bad++ == 0) first = i;
  }
  return bad ? describe(n, first, value, p[first], bad) : std::string();
}

Buffer::Buffer(size_t size, size_t guard) : size_(size), guard_((guard + 4095) / 4096 * 4096) {
  size_t total = guard_ + (size + 4095) / 4096 * 4096 + guard_;
  void* mem = nullptr;
  if (posix_memalign(&mem, 4096, total ? total : 4096) != 0) throw std::bad_alloc();
  base_ = static_cast<uint8_t*>(mem);
  data_ = base_ + guard_;
  fill_pattern(base_, guard_, kGuardSeed);
  fill_pattern(data_ + size_, guard_, kGuardSeed + 1);
  poison();
}

Buffer::~Buffer() {
  std::free(base_);
}

Buffer::Buffer(Buffer&& o) noexcept
    : base_(o.base_), data_(o.data_), size_(o.size_), guard_(o.guard_) {
  o.base_ = o.data_ = nullptr;
  o.size_ = o.guard_ = 0;
}

std::string Buffer::check_guards() const {
  std::string r = check_pattern(base_, guard_, kGuardSeed);
  if (!r.empty()) return "guard before the buffer overwritten: " + r;
  r = check_pattern(data_ + size_, guard_, kGuardSeed + 1);
  if (!r.empty())
    return "guard after the buffer (size " + std::to_string(size_) + ") overwritten: " + r;
  return {};
}

}  // namespace weft::ft
