#include "ofi/wire/rdma_wire.h"

#include <cstring>

#include "core/byte_codec.h"

namespace weft::ofi {
namespace {

constexpr uint32_t kCtsMagic = 0x52544657;    // "WFTR"
constexpr uint32_t kEagerMagic = 0x45544657;  // "WFTE"
// 3: eager data moved its index and tag into the remote CQ data.
// 4: a clear-to-send may speak for groups filled eagerly (skipped).
constexpr uint8_t kRdmaWireVersion = 4;
constexpr int32_t kEagerTagLimit = 1 << 19;  // |tag| below it fits the immediate
constexpr uint8_t kEagerTruncated = 1;
constexpr uint8_t kEagerSizeNotice = 2;
constexpr uint8_t kEagerAborted = 4;
constexpr uint8_t kEagerProbe = 8;

}  // namespace

size_t cts_size(int count, int rails) {
  return kCtsHeaderSize + static_cast<size_t>(count) * cts_entry_size(rails);
}

void encode_cts_header(uint8_t* out, uint32_t group_seq, uint32_t first_index, uint8_t slot,
                       uint8_t count, uint8_t rails) {
  put_le32(out, kCtsMagic);
  out[4] = kRdmaWireVersion;
  out[5] = count;
  out[6] = slot;
  out[7] = rails;
  put_le32(out + 8, group_seq);
  put_le32(out + 12, first_index);
  put_le32(out + 16, 0);  // skipped (set as it leaves), zero
}

void encode_cts_entry(uint8_t* out, int index, int rails, uint64_t size, int32_t tag,
                      const uint64_t* address, const uint64_t* key) {
  uint8_t* entry = out + kCtsHeaderSize + static_cast<size_t>(index) * cts_entry_size(rails);
  put_le64(entry, size);
  put_le32(entry + 8, static_cast<uint32_t>(tag));
  put_le32(entry + 12, 0);
  for (int r = 0; r < rails; ++r) {
    put_le64(entry + 16 + 16 * r, address[r]);
    put_le64(entry + 24 + 16 * r, key[r]);
  }
}

void encode_cts(const CtsMessage& cts, uint8_t* out) {
  encode_cts_header(out, cts.group_seq, cts.first_index, cts.slot, cts.count, cts.rails);
  put_le16(out + 16, cts.skipped);
  for (int i = 0; i < cts.count; ++i) {
    const CtsEntry& entry = cts.entries[i];
    encode_cts_entry(out, i, cts.rails, entry.size, entry.tag, entry.address, entry.key);
  }
}

void set_cts_skipped(uint8_t* encoded, uint16_t skipped) {
  put_le16(encoded + 16, skipped);
}

bool decode_cts(const uint8_t* bytes, size_t size, int rails, CtsMessage* cts, std::string* error) {
  if (size < kCtsHeaderSize) {
    *error = "clear-to-send of " + std::to_string(size) + " bytes is shorter than its header";
    return false;
  }
  if (get_le32(bytes) != kCtsMagic || bytes[4] != kRdmaWireVersion) {
    *error = "clear-to-send has a bad magic or wire version";
    return false;
  }
  CtsMessage decoded;
  decoded.count = bytes[5];
  decoded.slot = bytes[6];
  decoded.rails = bytes[7];
  if (decoded.count < 1 || decoded.count > kRdmaMaxEntries) {
    *error = "clear-to-send lists " + std::to_string(decoded.count) + " receives (1.." +
             std::to_string(kRdmaMaxEntries) + ")";
    return false;
  }
  if (decoded.slot >= kRdmaSlots) {
    *error = "clear-to-send names request slot " + std::to_string(decoded.slot);
    return false;
  }
  if (decoded.rails != rails) {
    *error = "clear-to-send describes " + std::to_string(decoded.rails) +
             " rails, the connection has " + std::to_string(rails);
    return false;
  }
  if (size != cts_size(decoded.count, decoded.rails)) {
    *error = "clear-to-send of " + std::to_string(size) + " bytes for " +
             std::to_string(decoded.count) + " receives (expected " +
             std::to_string(cts_size(decoded.count, decoded.rails)) + ")";
    return false;
  }
  decoded.group_seq = get_le32(bytes + 8);
  decoded.first_index = get_le32(bytes + 12);
  decoded.skipped = get_le16(bytes + 16);
  if (decoded.skipped > kRdmaMaxSkipped) {
    *error = "clear-to-send skips " + std::to_string(decoded.skipped) + " groups (at most " +
             std::to_string(kRdmaMaxSkipped) + ")";
    return false;
  }
  if (get_le16(bytes + 18) != 0) {
    *error = "clear-to-send has non-zero reserved header bytes";
    return false;
  }
  for (int i = 0; i < decoded.count; ++i) {
    const uint8_t* entry =
        bytes + kCtsHeaderSize + static_cast<size_t>(i) * cts_entry_size(decoded.rails);
    CtsEntry& out = decoded.entries[i];
    out.size = get_le64(entry);
    out.tag = static_cast<int32_t>(get_le32(entry + 8));
    if (get_le32(entry + 12) != 0) {
      *error = "clear-to-send entry " + std::to_string(i) + " has non-zero reserved bytes";
      return false;
    }
    for (int r = 0; r < decoded.rails; ++r) {
      out.address[r] = get_le64(entry + 16 + 16 * r);
      out.key[r] = get_le64(entry + 24 + 16 * r);
      if (out.size > 0 && out.address[r] + out.size < out.address[r]) {
        *error = "clear-to-send entry " + std::to_string(i) + " wraps the address space";
        return false;
      }
    }
  }
  *cts = decoded;
  return true;
}

void encode_eager_header(const EagerHeader& header, uint8_t* out) {
  std::memset(out, 0, kEagerHeaderSize);
  put_le32(out, kEagerMagic);
  out[4] = kRdmaWireVersion;
  out[5] = static_cast<uint8_t>(
      (header.truncated ? kEagerTruncated : 0) | (header.size_notice ? kEagerSizeNotice : 0) |
      (header.aborted ? kEagerAborted : 0) | (header.probe ? kEagerProbe : 0));
  put_le32(out + 8, header.index);
  put_le32(out + 12, static_cast<uint32_t>(header.tag));
  put_le64(out + 16, header.size);
}

bool decode_eager_header(const uint8_t* bytes, size_t length, uint64_t max_data,
                         EagerHeader* header, std::string* error) {
  if (length < kEagerHeaderSize) {
    *error = "eager message of " + std::to_string(length) + " bytes is shorter than its header";
    return false;
  }
  if (get_le32(bytes) != kEagerMagic || bytes[4] != kRdmaWireVersion) {
    *error = "eager message has a bad magic or wire version";
    return false;
  }
  const uint8_t flags = bytes[5];
  // At most one flag: a message is data, or one kind of notice.
  if ((flags & ~(kEagerTruncated | kEagerSizeNotice | kEagerAborted | kEagerProbe)) != 0 ||
      (flags & (flags - 1)) != 0 || bytes[6] != 0 || bytes[7] != 0) {
    *error = "eager message has unknown flags or non-zero reserved bytes";
    return false;
  }
  EagerHeader decoded;
  decoded.truncated = (bytes[5] & kEagerTruncated) != 0;
  decoded.size_notice = (bytes[5] & kEagerSizeNotice) != 0;
  decoded.aborted = (bytes[5] & kEagerAborted) != 0;
  decoded.probe = (bytes[5] & kEagerProbe) != 0;
  decoded.index = get_le32(bytes + 8);
  decoded.tag = static_cast<int32_t>(get_le32(bytes + 12));
  decoded.size = get_le64(bytes + 16);
  size_t data = length - kEagerHeaderSize;
  if (decoded.size_notice && (data != 0 || decoded.tag < 0 || decoded.tag >= kRdmaMaxEntries)) {
    *error = "size notice carries data or names entry " + std::to_string(decoded.tag);
    return false;
  }
  if (decoded.aborted && data != 0) {
    *error = "abort notice carries data";
    return false;
  }
  if (decoded.probe && (data != 0 || decoded.index != 0 || decoded.tag != 0 || decoded.size != 0)) {
    *error = "probe carries data or a non-zero index, tag or size";
    return false;
  }
  if (decoded.size_notice || decoded.aborted || decoded.probe) {
    *header = decoded;
    return true;
  }
  if (decoded.truncated ? data != 0 : (decoded.size != data || decoded.size > max_data)) {
    *error = "eager message says " + std::to_string(decoded.size) + " bytes but carries " +
             std::to_string(data) + (decoded.truncated ? " with a truncation notice" : "");
    return false;
  }
  *header = decoded;
  return true;
}

bool eager_tag_fits(int32_t tag) {
  return tag > -kEagerTagLimit && tag < kEagerTagLimit;
}

uint32_t encode_eager_immediate(uint32_t index, int32_t tag) {
  return (static_cast<uint32_t>(tag) << kEagerIndexBits) | (index & ((1u << kEagerIndexBits) - 1));
}

bool decode_eager_immediate(const uint64_t* value, uint32_t next, EagerImmediate* immediate,
                            std::string* error) {
  if (value == nullptr) {
    *error = "eager message carries no immediate";
    return false;
  }
  if (*value > UINT32_MAX) {
    *error = "eager immediate " + std::to_string(*value) + " is wider than 32 bits";
    return false;
  }
  const auto bits = static_cast<uint32_t>(*value);
  EagerImmediate decoded;
  if (bits == kEagerHeaderFollows) {
    decoded.header_follows = true;
    *immediate = decoded;
    return true;
  }
  // Sign-extend the 20-bit tag; -2^19 is the marker's and no tag's.
  decoded.tag = static_cast<int32_t>(bits) >> kEagerIndexBits;
  if (!eager_tag_fits(decoded.tag)) {
    *error = "eager immediate " + std::to_string(bits) + " names no tag";
    return false;
  }
  // The index within 2^11 of `next` whose low bits these are.
  constexpr uint32_t kMask = (1u << kEagerIndexBits) - 1;
  const uint32_t base = next - (1u << (kEagerIndexBits - 1));
  decoded.index = base + ((bits - base) & kMask);
  *immediate = decoded;
  return true;
}

uint32_t encode_immediate(const WriteImmediate& immediate) {
  return (static_cast<uint32_t>(immediate.target) << 16) |
         (static_cast<uint32_t>(immediate.slot & 0x1f) << 11) |
         (static_cast<uint32_t>(immediate.entry & 0x7) << 8) |
         (static_cast<uint32_t>((immediate.segments - 1) & 0xf) << 4) |
         static_cast<uint32_t>(immediate.segment & 0xf);
}

bool decode_immediate(uint32_t value, WriteImmediate* immediate, std::string* error) {
  WriteImmediate decoded;
  decoded.target = static_cast<uint16_t>(value >> 16);
  decoded.slot = static_cast<uint8_t>((value >> 11) & 0x1f);
  decoded.entry = static_cast<uint8_t>((value >> 8) & 0x7);
  decoded.segments = static_cast<uint8_t>(((value >> 4) & 0xf) + 1);
  decoded.segment = static_cast<uint8_t>(value & 0xf);
  if (decoded.target == 0) {
    *error = "write immediate names no receiver (target 0)";
    return false;
  }
  if (decoded.segment >= decoded.segments) {
    *error = "write immediate names segment " + std::to_string(decoded.segment) + " of " +
             std::to_string(decoded.segments);
    return false;
  }
  *immediate = decoded;
  return true;
}

}  // namespace weft::ofi
