#include "data_check.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdint>
#include <vector>

using namespace weft::perf;

TEST_CASE("patterns round-trip for every tail length") {
  for (size_t size : {1u, 7u, 8u, 9u, 63u, 64u, 65u, 4096u, 4101u}) {
    std::vector<unsigned char> buf(size);
    uint64_t key = pattern_key(0, size, 3);
    fill_pattern(buf.data(), size, key);
    CHECK(find_mismatch(buf.data(), size, key) == SIZE_MAX);
    for (size_t off = 0; off < size; ++off) REQUIRE(buf[off] == expected_byte(key, off));
  }
}

TEST_CASE("a flipped bit is found at its offset") {
  const size_t size = 10000;
  std::vector<unsigned char> buf(size);
  uint64_t key = pattern_key(1, size, 0);
  fill_pattern(buf.data(), size, key);
  for (size_t off : {size_t{0}, size_t{511}, size_t{512}, size_t{9999}}) {
    buf[off] ^= 0x10;
    CHECK(find_mismatch(buf.data(), size, key) == off);
    buf[off] ^= 0x10;
  }
}

TEST_CASE("keys separate sender, size and slot") {
  CHECK(pattern_key(0, 64, 0) != pattern_key(1, 64, 0));
  CHECK(pattern_key(0, 64, 0) != pattern_key(0, 128, 0));
  CHECK(pattern_key(0, 64, 0) != pattern_key(0, 64, 1));
  std::vector<unsigned char> buf(64);
  fill_pattern(buf.data(), buf.size(), pattern_key(0, 64, 1));
  CHECK(find_mismatch(buf.data(), buf.size(), pattern_key(0, 64, 0)) != SIZE_MAX);
  poison(buf.data(), buf.size());
  CHECK(find_mismatch(buf.data(), buf.size(), pattern_key(0, 64, 1)) == 0);
}

TEST_CASE("a message filled and checked in pieces matches the whole") {
  const size_t size = 10000;
  uint64_t key = pattern_key(1, size, 2);
  std::vector<unsigned char> whole(size);
  fill_pattern(whole.data(), size, key);
  for (size_t piece : {size_t{8}, size_t{64}, size_t{4096}, size_t{8000}}) {
    std::vector<unsigned char> pieces(size);
    for (size_t at = 0; at < size; at += piece) {
      fill_pattern_at(pieces.data() + at, std::min(piece, size - at), key, at);
    }
    REQUIRE(pieces == whole);
    for (size_t at = 0; at < size; at += piece) {
      CHECK(find_mismatch_at(pieces.data() + at, std::min(piece, size - at), key, at) == SIZE_MAX);
    }
  }
  // A flipped byte in a later piece is reported relative to that piece.
  whole[4097] ^= 1;
  CHECK(find_mismatch_at(whole.data() + 4096, size - 4096, key, 4096) == 1);
  CHECK(find_mismatch_at(whole.data(), 4096, key, 0) == SIZE_MAX);
  CHECK(find_mismatch(whole.data(), size, key) == 4097);
}
