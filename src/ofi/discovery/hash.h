// FNV-1a hashes: stable across processes and builds, used for identifiers
// that travel between peers (provider fingerprints) or must not change
// between runs (device GUIDs).
#pragma once

#include <cstdint>
#include <string_view>

namespace weft {

constexpr uint32_t fnv1a_32(std::string_view text) {
  uint32_t hash = 2166136261u;
  for (char c : text) {
    hash ^= static_cast<unsigned char>(c);
    hash *= 16777619u;
  }
  return hash;
}

constexpr uint64_t fnv1a_64(std::string_view text) {
  uint64_t hash = 1469598103934665603ull;
  for (char c : text) {
    hash ^= static_cast<unsigned char>(c);
    hash *= 1099511628211ull;
  }
  return hash;
}

}  // namespace weft
