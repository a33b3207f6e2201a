// Fixed-width integers into and out of byte buffers, the byte order named
// at every call: put_le32 / get_be16 / get_host64 ... Every wire format
// (docs/wire-formats.md) and every foreign in-memory layout weft reads goes
// through these, never through a memcpy of an integer or a private helper,
// so a reader sees the order where the bytes are written. The buffers need
// no alignment; the calls compile to one load or store (plus a byte swap
// when the order is not the host's), so the data path may use them.
#pragma once

#include <bit>
#include <concepts>
#include <cstdint>
#include <cstring>

namespace weft {

static_assert(std::endian::native == std::endian::little || std::endian::native == std::endian::big,
              "weft's byte codec knows little- and big-endian hosts only");

template <std::unsigned_integral T>
constexpr T swap_bytes(T value) {
  if constexpr (sizeof(T) == 1) {
    return value;
  } else if constexpr (sizeof(T) == 2) {
    return __builtin_bswap16(value);
  } else if constexpr (sizeof(T) == 4) {
    return __builtin_bswap32(value);
  } else {
    static_assert(sizeof(T) == 8, "1, 2, 4 or 8 bytes");
    return __builtin_bswap64(value);
  }
}

// Writes sizeof(T) bytes of `value` at `out` in byte order `order`.
template <std::endian order, std::unsigned_integral T>
inline void put_bytes(uint8_t* out, T value) {
  if constexpr (order != std::endian::native) value = swap_bytes(value);
  std::memcpy(out, &value, sizeof(T));
}

// Reads sizeof(T) bytes at `in` in byte order `order`.
template <std::endian order, std::unsigned_integral T>
inline T get_bytes(const uint8_t* in) {
  T value;
  std::memcpy(&value, in, sizeof(T));
  if constexpr (order != std::endian::native) value = swap_bytes(value);
  return value;
}

// Little-endian: weft's own wire formats.
inline void put_le16(uint8_t* out, uint16_t value) {
  put_bytes<std::endian::little>(out, value);
}
inline void put_le32(uint8_t* out, uint32_t value) {
  put_bytes<std::endian::little>(out, value);
}
inline void put_le64(uint8_t* out, uint64_t value) {
  put_bytes<std::endian::little>(out, value);
}
inline uint16_t get_le16(const uint8_t* in) {
  return get_bytes<std::endian::little, uint16_t>(in);
}
inline uint32_t get_le32(const uint8_t* in) {
  return get_bytes<std::endian::little, uint32_t>(in);
}
inline uint64_t get_le64(const uint8_t* in) {
  return get_bytes<std::endian::little, uint64_t>(in);
}

// Big-endian (network order): socket addresses, as the network writes them.
inline void put_be16(uint8_t* out, uint16_t value) {
  put_bytes<std::endian::big>(out, value);
}
inline void put_be32(uint8_t* out, uint32_t value) {
  put_bytes<std::endian::big>(out, value);
}
inline void put_be64(uint8_t* out, uint64_t value) {
  put_bytes<std::endian::big>(out, value);
}
inline uint16_t get_be16(const uint8_t* in) {
  return get_bytes<std::endian::big, uint16_t>(in);
}
inline uint32_t get_be32(const uint8_t* in) {
  return get_bytes<std::endian::big, uint32_t>(in);
}
inline uint64_t get_be64(const uint8_t* in) {
  return get_bytes<std::endian::big, uint64_t>(in);
}

// Host order: structures another process on this host laid out in memory
// (never bytes that cross the network).
inline uint32_t get_host32(const uint8_t* in) {
  return get_bytes<std::endian::native, uint32_t>(in);
}
inline uint64_t get_host64(const uint8_t* in) {
  return get_bytes<std::endian::native, uint64_t>(in);
}

}  // namespace weft
