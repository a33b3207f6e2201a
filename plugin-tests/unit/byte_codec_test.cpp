#include "core/byte_codec.h"

#include <catch2/catch.hpp>
#include <cstring>
#include <vector>

using namespace weft;

namespace {

// The bytes after `offset` of a buffer, as a list a failed CHECK prints.
std::vector<int> bytes_at(const uint8_t* buffer, size_t offset, size_t count) {
  return std::vector<int>(buffer + offset, buffer + offset + count);
}

}  // namespace

TEST_CASE("little-endian puts the least significant byte first", "[unit][codec]") {
  uint8_t buffer[12] = {};
  put_le16(buffer, 0x0102);
  CHECK(bytes_at(buffer, 0, 2) == std::vector<int>{0x02, 0x01});
  put_le32(buffer, 0x01020304);
  CHECK(bytes_at(buffer, 0, 4) == std::vector<int>{0x04, 0x03, 0x02, 0x01});
  put_le64(buffer, 0x0102030405060708);
  CHECK(bytes_at(buffer, 0, 8) == std::vector<int>{0x08, 0x07, 0x06, 0x05, 0x04, 0x03, 0x02, 0x01});
}

TEST_CASE("big-endian puts the most significant byte first", "[unit][codec]") {
  uint8_t buffer[12] = {};
  put_be16(buffer, 0x0102);
  CHECK(bytes_at(buffer, 0, 2) == std::vector<int>{0x01, 0x02});
  put_be32(buffer, 0x01020304);
  CHECK(bytes_at(buffer, 0, 4) == std::vector<int>{0x01, 0x02, 0x03, 0x04});
  put_be64(buffer, 0x0102030405060708);
  CHECK(bytes_at(buffer, 0, 8) == std::vector<int>{0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08});
}

// Puts `value` in each order at `at` and reads it back in both: the same
// order gives `value`, the other its bytes reversed (`swapped`).
template <typename T, typename Put, typename Get>
void check_orders(uint8_t* at, T value, T swapped, Put put_le, Put put_be, Get get_le, Get get_be) {
  put_le(at, value);
  CHECK(get_le(at) == value);
  CHECK(get_be(at) == swapped);
  put_be(at, value);
  CHECK(get_be(at) == value);
  CHECK(get_le(at) == swapped);
}

TEST_CASE("each get reads the order its put wrote, at any alignment", "[unit][codec]") {
  for (size_t offset = 0; offset < 4; ++offset) {
    uint8_t buffer[16] = {};
    check_orders<uint16_t>(buffer + offset, 0xa1b2, 0xb2a1, put_le16, put_be16, get_le16, get_be16);
    check_orders<uint32_t>(buffer + offset, 0xa1b2c3d4, 0xd4c3b2a1, put_le32, put_be32, get_le32,
                           get_be32);
    check_orders<uint64_t>(buffer + offset, 0xa1b2c3d4e5f60718, 0x1807f6e5d4c3b2a1, put_le64,
                           put_be64, get_le64, get_be64);
  }
}

TEST_CASE("a put writes its width and not a byte more", "[unit][codec]") {
  uint8_t buffer[10];
  std::memset(buffer, 0xee, sizeof(buffer));
  put_le32(buffer + 1, 0);
  CHECK(bytes_at(buffer, 0, 6) == std::vector<int>{0xee, 0, 0, 0, 0, 0xee});
  std::memset(buffer, 0xee, sizeof(buffer));
  put_be16(buffer + 1, 0);
  CHECK(bytes_at(buffer, 0, 4) == std::vector<int>{0xee, 0, 0, 0xee});
  std::memset(buffer, 0xee, sizeof(buffer));
  put_le64(buffer + 1, 0);
  CHECK(bytes_at(buffer, 0, 10) == std::vector<int>{0xee, 0, 0, 0, 0, 0, 0, 0, 0, 0xee});
}

TEST_CASE("host order reads what this process laid out in memory", "[unit][codec]") {
  const uint32_t word = 0x01020304;
  const uint64_t wide = 0x0102030405060708;
  uint8_t buffer[13] = {};
  std::memcpy(buffer + 1, &word, sizeof(word));
  std::memcpy(buffer + 5, &wide, sizeof(wide));
  CHECK(get_host32(buffer + 1) == word);
  CHECK(get_host64(buffer + 5) == wide);
}
