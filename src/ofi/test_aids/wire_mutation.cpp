#include "ofi/test_aids/wire_mutation.h"

#include <utility>

namespace weft::ofi {
namespace {

constexpr std::pair<std::string_view, WireMutation> kNames[] = {
    {"cts-slot", WireMutation::kCtsSlot},
    {"cts-sequence", WireMutation::kCtsSequence},
    {"cts-first-index", WireMutation::kCtsFirstIndex},
    {"cts-rails", WireMutation::kCtsRails},
    {"cts-count", WireMutation::kCtsCount},
    {"cts-size", WireMutation::kCtsSize},
    {"cts-key", WireMutation::kCtsKey},
    {"cts-address", WireMutation::kCtsAddress},
    {"cts-tag", WireMutation::kCtsTag},
    {"eager-index", WireMutation::kEagerIndex},
    {"eager-tag", WireMutation::kEagerTag},
    {"write-slot", WireMutation::kWriteSlot},
    {"write-entry", WireMutation::kWriteEntry},
    {"write-segments", WireMutation::kWriteSegments},
    {"write-oversize", WireMutation::kWriteOversize},
    {"tagged-size", WireMutation::kTaggedSize},
};

}  // namespace

bool parse_wire_mutation(std::string_view name, WireMutation* out) {
  if (name.empty()) {
    *out = WireMutation::kNone;
    return true;
  }
  for (const auto& [n, m] : kNames) {
    if (name == n) {
      *out = m;
      return true;
    }
  }
  return false;
}

std::string wire_mutation_names() {
  std::string names;
  for (const auto& [n, m] : kNames) names += (names.empty() ? "" : " ") + std::string(n);
  return names;
}

void mutate_cts(WireMutation mutation, CtsMessage* cts) {
  switch (mutation) {
    case WireMutation::kCtsSlot:
      cts->slot = static_cast<uint8_t>(kRdmaSlots + 5);
      break;
    case WireMutation::kCtsSequence:
      cts->group_seq += 1;
      break;
    case WireMutation::kCtsFirstIndex:
      cts->first_index += 3;
      break;
    case WireMutation::kCtsRails:
      cts->rails = static_cast<uint8_t>(cts->rails + 1);
      break;
    case WireMutation::kCtsCount:
      cts->count = 0;
      break;
    default:
      break;
  }
  for (int i = 0; i < cts->count; ++i) {
    CtsEntry& entry = cts->entries[i];
    switch (mutation) {
      case WireMutation::kCtsSize:
        entry.size = 0;
        break;
      case WireMutation::kCtsTag:
        entry.tag ^= 0x40000;
        break;
      case WireMutation::kCtsKey:
        for (uint64_t& key : entry.key) key ^= 0x5a5a5a5a00ull;
        break;
      case WireMutation::kCtsAddress:
        for (uint64_t& address : entry.address) address += uint64_t{1} << 30;
        break;
      default:
        break;
    }
  }
}

void mutate_eager(WireMutation mutation, uint32_t* index, int32_t* tag) {
  if (mutation == WireMutation::kEagerIndex) *index += 1000;
  if (mutation == WireMutation::kEagerTag) *tag ^= 0x40000;
}

void mutate_write(WireMutation mutation, WriteImmediate* immediate) {
  switch (mutation) {
    case WireMutation::kWriteSlot:
      immediate->slot = (immediate->slot + 1) % kRdmaSlots;
      break;
    case WireMutation::kWriteEntry:
      immediate->entry = kRdmaMaxEntries - 1;
      break;
    case WireMutation::kWriteSegments:
      if (immediate->segments < kRdmaMaxSegments) ++immediate->segments;
      break;
    default:
      break;
  }
}

}  // namespace weft::ofi
