// The RDMA protocol's bytes from a peer: clear-to-sends, eager headers and
// the 32-bit immediates. Decoded values stay in range (slots, entries,
// segments, skipped groups, addresses that do not wrap); what decodes
// re-encodes to the same bytes.
#include <cstring>
#include <string>

#include "fuzz_util.h"
#include "ofi/wire/rdma_wire.h"

using namespace weft::ofi;

namespace {

void cts(const uint8_t* data, size_t size, int rails) {
  CtsMessage decoded;
  std::string error;
  if (!decode_cts(data, size, rails, &decoded, &error)) {
    FUZZ_CHECK(!error.empty());
    return;
  }
  FUZZ_CHECK(decoded.count >= 1 && decoded.count <= kRdmaMaxEntries);
  FUZZ_CHECK(decoded.slot < kRdmaSlots && decoded.rails == rails);
  FUZZ_CHECK(decoded.skipped <= kRdmaMaxSkipped);
  FUZZ_CHECK(size == cts_size(decoded.count, decoded.rails));
  for (int i = 0; i < decoded.count; ++i) {
    for (int r = 0; r < rails; ++r) {
      const CtsEntry& entry = decoded.entries[i];
      FUZZ_CHECK(entry.size == 0 || entry.address[r] + entry.size >= entry.address[r]);
    }
  }
  uint8_t bytes[kCtsMaxSize];
  encode_cts(decoded, bytes);
  FUZZ_CHECK(std::memcmp(bytes, data, size) == 0);
}

void eager_header(const uint8_t* data, size_t size, uint64_t max_data) {
  EagerHeader decoded;
  std::string error;
  if (!decode_eager_header(data, size, max_data, &decoded, &error)) {
    FUZZ_CHECK(!error.empty());
    return;
  }
  FUZZ_CHECK(int(decoded.truncated) + int(decoded.size_notice) + int(decoded.aborted) +
                 int(decoded.probe) <=
             1);
  uint8_t bytes[kEagerHeaderSize];
  encode_eager_header(decoded, bytes);
  FUZZ_CHECK(std::memcmp(bytes, data, kEagerHeaderSize) == 0);
}

void immediates(const uint8_t* data, size_t size) {
  if (size < 8) return;
  uint32_t value;
  uint32_t next;
  std::memcpy(&value, data, 4);
  std::memcpy(&next, data + 4, 4);
  WriteImmediate write;
  std::string error;
  if (decode_immediate(value, &write, &error)) {
    FUZZ_CHECK(write.slot < kRdmaSlots && write.entry < kRdmaMaxEntries);
    FUZZ_CHECK(write.segments >= 1 && write.segments <= kRdmaMaxSegments);
    FUZZ_CHECK(write.segment < write.segments);
    FUZZ_CHECK(encode_immediate(write) == value);
  }
  const uint64_t wide = value;
  EagerImmediate eager;
  if (decode_eager_immediate(&wide, next, &eager, &error) && !eager.header_follows) {
    FUZZ_CHECK(eager_tag_fits(eager.tag));
    FUZZ_CHECK(encode_eager_immediate(eager.index, eager.tag) == value);
    // Rebuilt within the window around the receiver's next index.
    FUZZ_CHECK(eager.index - next + 2048u < 4096u);
  }
  FUZZ_CHECK(!decode_eager_immediate(nullptr, next, &eager, &error) || eager.header_follows);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const uint8_t selector = data[0];
  ++data;
  --size;
  switch (selector % 3) {
    case 0:
      cts(data, size, 1 + (selector >> 2) % kMaxRails);
      break;
    case 1:
      eager_header(data, size, (selector & 0x80) ? 8192 : 65536);
      break;
    default:
      immediates(data, size);
      break;
  }
  return 0;
}
