// The RDMA protocol's wire formats: round trips, and every malformed field
// a buggy or hostile peer could send is refused with its reason.
#include "ofi/wire/rdma_wire.h"

#include <catch2/catch.hpp>
#include <cstdint>
#include <cstring>

#include "ofi/discovery/protocol_choice.h"

using namespace weft::ofi;

namespace {

CtsMessage sample_cts(int count, int rails = 1) {
  CtsMessage cts;
  cts.group_seq = 41;
  cts.first_index = 1000;
  cts.slot = 31;
  cts.count = static_cast<uint8_t>(count);
  cts.rails = static_cast<uint8_t>(rails);
  cts.skipped = static_cast<uint16_t>(count + rails);
  for (int i = 0; i < count; ++i) {
    cts.entries[i].size = 4096 + i;
    cts.entries[i].tag = 7 * i;
    for (int r = 0; r < rails; ++r) {
      cts.entries[i].address[r] = 0x10000 + 0x1000 * i + 0x100000 * r;
      cts.entries[i].key[r] = 0xabc0 + i + 0x10 * r;
    }
  }
  return cts;
}

}  // namespace

TEST_CASE("clear-to-send round trip for 1..8 entries on 1..8 rails", "[unit][rdma_wire]") {
  for (int rails = 1; rails <= kMaxRails; ++rails) {
    for (int count = 1; count <= kRdmaMaxEntries; ++count) {
      CtsMessage cts = sample_cts(count, rails);
      uint8_t bytes[kCtsMaxSize];
      encode_cts(cts, bytes);
      CtsMessage decoded;
      std::string error;
      REQUIRE(decode_cts(bytes, cts_size(count, rails), rails, &decoded, &error));
      CHECK(decoded.group_seq == 41);
      CHECK(decoded.first_index == 1000);
      CHECK(decoded.slot == 31);
      CHECK(decoded.rails == rails);
      CHECK(decoded.skipped == count + rails);
      REQUIRE(decoded.count == count);
      for (int i = 0; i < count; ++i) {
        CHECK(decoded.entries[i].size == cts.entries[i].size);
        CHECK(decoded.entries[i].tag == cts.entries[i].tag);
        for (int r = 0; r < rails; ++r) {
          CHECK(decoded.entries[i].address[r] == cts.entries[i].address[r]);
          CHECK(decoded.entries[i].key[r] == cts.entries[i].key[r]);
        }
      }
    }
  }
}

TEST_CASE("the skipped count is set when a clear-to-send leaves", "[unit][rdma_wire]") {
  CtsMessage cts = sample_cts(1);
  cts.skipped = 0;
  uint8_t bytes[kCtsMaxSize];
  encode_cts(cts, bytes);
  set_cts_skipped(bytes, kRdmaMaxSkipped);
  CtsMessage decoded;
  std::string error;
  REQUIRE(decode_cts(bytes, cts_size(1, 1), 1, &decoded, &error));
  CHECK(decoded.skipped == kRdmaMaxSkipped);
  CHECK(decoded.first_index == 1000);
}

TEST_CASE("a posted size larger than any message is legal", "[unit][rdma_wire]") {
  // A receive may be larger than the device's message limit (rxe: 8 MiB);
  // the sender writes only its own size, so nothing bounds it here.
  CtsMessage cts = sample_cts(1);
  cts.entries[0].size = uint64_t{1} << 40;
  uint8_t bytes[kCtsMaxSize];
  encode_cts(cts, bytes);
  CtsMessage decoded;
  std::string error;
  REQUIRE(decode_cts(bytes, cts_size(1, 1), 1, &decoded, &error));
  CHECK(decoded.entries[0].size == (uint64_t{1} << 40));
}

TEST_CASE("malformed clear-to-send messages are refused by name", "[unit][rdma_wire]") {
  CtsMessage cts = sample_cts(2);
  uint8_t good[kCtsMaxSize];
  encode_cts(cts, good);
  const size_t size = cts_size(2, 1);
  auto refused = [&](uint8_t* bytes, size_t length, const char* reason, int rails = 1) {
    CtsMessage out;
    std::string error;
    CHECK_FALSE(decode_cts(bytes, length, rails, &out, &error));
    CHECK_THAT(error, Catch::Contains(reason));
  };
  uint8_t bytes[kCtsMaxSize];
  std::memcpy(bytes, good, size);
  refused(bytes, 8, "shorter than its header");
  bytes[4] = 2;  // before eager data moved into the immediate
  refused(bytes, size, "wire version");
  bytes[4] = good[4];
  bytes[0] ^= 1;
  refused(bytes, size, "bad magic");
  std::memcpy(bytes, good, size);
  bytes[5] = 0;
  refused(bytes, size, "lists 0 receives");
  bytes[5] = 9;
  refused(bytes, size, "lists 9 receives");
  std::memcpy(bytes, good, size);
  bytes[6] = 32;
  refused(bytes, size, "request slot 32");
  std::memcpy(bytes, good, size);
  refused(bytes, size - 1, "expected 84");
  std::memcpy(bytes, good, size);
  set_cts_skipped(bytes, kRdmaMaxSkipped + 1);
  refused(bytes, size, "skips 129 groups (at most 128)");
  std::memcpy(bytes, good, size);
  bytes[19] = 1;
  refused(bytes, size, "reserved header bytes");
  std::memcpy(bytes, good, size);
  bytes[kCtsHeaderSize + 12] = 1;
  refused(bytes, size, "reserved");
  std::memcpy(bytes, good, size);
  refused(bytes, size, "describes 1 rails, the connection has 2", 2);
  bytes[7] = 0;
  refused(bytes, size, "describes 0 rails");
  std::memcpy(bytes, good, size);
  uint64_t wrap = ~uint64_t{0} - 16;
  std::memcpy(bytes + kCtsHeaderSize + 16, &wrap, 8);
  refused(bytes, size, "wraps");
  // Every rail's address is checked, not only the first.
  CtsMessage two_rails = sample_cts(1, 2);
  encode_cts(two_rails, bytes);
  std::memcpy(bytes + kCtsHeaderSize + 32, &wrap, 8);
  refused(bytes, cts_size(1, 2), "wraps", 2);
}

TEST_CASE("eager headers: data, truncation and size notices", "[unit][rdma_wire]") {
  uint8_t bytes[kEagerHeaderSize];
  EagerHeader header;
  header.index = 77;
  header.tag = -3;
  header.size = 100;
  encode_eager_header(header, bytes);
  EagerHeader out;
  std::string error;
  REQUIRE(decode_eager_header(bytes, kEagerHeaderSize + 100, 8192, &out, &error));
  CHECK(out.index == 77);
  CHECK(out.tag == -3);
  CHECK(out.size == 100);
  CHECK_FALSE(out.truncated);
  // The length that arrived must match the size it claims.
  CHECK_FALSE(decode_eager_header(bytes, kEagerHeaderSize + 99, 8192, &out, &error));
  CHECK_THAT(error, Catch::Contains("says 100 bytes but carries 99"));
  // More than the eager limit is refused even if the bytes are there.
  CHECK_FALSE(decode_eager_header(bytes, kEagerHeaderSize + 100, 64, &out, &error));
  CHECK_FALSE(decode_eager_header(bytes, 10, 8192, &out, &error));
  CHECK_THAT(error, Catch::Contains("shorter than its header"));

  header.truncated = true;
  header.size = 1 << 30;
  encode_eager_header(header, bytes);
  REQUIRE(decode_eager_header(bytes, kEagerHeaderSize, 8192, &out, &error));
  CHECK(out.truncated);
  CHECK(out.size == (1u << 30));

  header.truncated = false;
  header.size_notice = true;
  header.tag = 8;  // entries are 0..7
  encode_eager_header(header, bytes);
  CHECK_FALSE(decode_eager_header(bytes, kEagerHeaderSize, 8192, &out, &error));
  CHECK_THAT(error, Catch::Contains("names entry 8"));
  header.tag = 3;
  encode_eager_header(header, bytes);
  REQUIRE(decode_eager_header(bytes, kEagerHeaderSize, 8192, &out, &error));
  CHECK(out.size_notice);

  bytes[5] = 0x80;
  CHECK_FALSE(decode_eager_header(bytes, kEagerHeaderSize, 8192, &out, &error));
  CHECK_THAT(error, Catch::Contains("unknown flags"));
  bytes[5] = 0x05;  // two notices at once
  CHECK_FALSE(decode_eager_header(bytes, kEagerHeaderSize, 8192, &out, &error));
  CHECK_THAT(error, Catch::Contains("unknown flags"));

  EagerHeader abort;
  abort.index = 12;
  abort.aborted = true;
  encode_eager_header(abort, bytes);
  REQUIRE(decode_eager_header(bytes, kEagerHeaderSize, 8192, &out, &error));
  CHECK(out.aborted);
  CHECK_FALSE(out.size_notice);
  CHECK(out.index == 12);
  CHECK_FALSE(decode_eager_header(bytes, kEagerHeaderSize + 4, 8192, &out, &error));
  CHECK_THAT(error, Catch::Contains("abort notice carries data"));

  EagerHeader probe;
  probe.probe = true;
  encode_eager_header(probe, bytes);
  CHECK(bytes[5] == 8);
  REQUIRE(decode_eager_header(bytes, kEagerHeaderSize, 8192, &out, &error));
  CHECK(out.probe);
  CHECK_FALSE(out.aborted);
  CHECK_FALSE(decode_eager_header(bytes, kEagerHeaderSize + 1, 8192, &out, &error));
  CHECK_THAT(error, Catch::Contains("probe carries data"));
  for (int field : {8, 12, 16}) {
    uint8_t changed[kEagerHeaderSize];
    std::memcpy(changed, bytes, sizeof changed);
    changed[field] = 1;
    CHECK_FALSE(decode_eager_header(changed, kEagerHeaderSize, 8192, &out, &error));
    CHECK_THAT(error, Catch::Contains("non-zero index, tag or size"));
  }
  bytes[5] = 0x0c;  // probe and abort at once
  CHECK_FALSE(decode_eager_header(bytes, kEagerHeaderSize, 8192, &out, &error));
  CHECK_THAT(error, Catch::Contains("unknown flags"));
}

TEST_CASE("eager immediates: tag and index low bits, or a header follows", "[unit][rdma_wire]") {
  EagerImmediate out;
  std::string error;
  // Round trip across tags, and indices on both sides of the receiver's next.
  for (int32_t tag : {0, 1, -1, 7, -3, (1 << 19) - 1, -(1 << 19) + 1}) {
    for (uint32_t next : {0u, 5u, 4095u, 4096u, 100000u, 0xfffffff0u}) {
      for (int32_t delta : {-2048, -512, -1, 0, 1, 255, 511, 2047}) {
        const uint32_t index = next + static_cast<uint32_t>(delta);
        const uint64_t value = encode_eager_immediate(index, tag);
        INFO("tag " << tag << " next " << next << " delta " << delta);
        REQUIRE(decode_eager_immediate(&value, next, &out, &error));
        CHECK_FALSE(out.header_follows);
        CHECK(out.tag == tag);
        CHECK(out.index == index);
      }
    }
  }
  CHECK(eager_tag_fits((1 << 19) - 1));
  CHECK(eager_tag_fits(-(1 << 19) + 1));
  CHECK_FALSE(eager_tag_fits(1 << 19));
  CHECK_FALSE(eager_tag_fits(-(1 << 19)));
  CHECK_FALSE(eager_tag_fits(INT32_MIN));
  CHECK_FALSE(eager_tag_fits(INT32_MAX));

  const uint64_t marker = kEagerHeaderFollows;
  REQUIRE(decode_eager_immediate(&marker, 77, &out, &error));
  CHECK(out.header_follows);
  // The marker's tag field with index bits set names no tag.
  const uint64_t bad = kEagerHeaderFollows | 5;
  CHECK_FALSE(decode_eager_immediate(&bad, 77, &out, &error));
  CHECK_THAT(error, Catch::Contains("names no tag"));
  const uint64_t wide = uint64_t{1} << 32;
  CHECK_FALSE(decode_eager_immediate(&wide, 77, &out, &error));
  CHECK_THAT(error, Catch::Contains("wider than 32 bits"));
  CHECK_FALSE(decode_eager_immediate(nullptr, 77, &out, &error));
  CHECK_THAT(error, Catch::Contains("no immediate"));
}

TEST_CASE("write immediates round trip and reject what cannot be", "[unit][rdma_wire]") {
  WriteImmediate imm;
  imm.target = 65535;
  imm.slot = 31;
  imm.entry = 7;
  imm.segments = 16;
  imm.segment = 15;
  WriteImmediate out;
  std::string error;
  REQUIRE(decode_immediate(encode_immediate(imm), &out, &error));
  CHECK(out.target == 65535);
  CHECK(out.slot == 31);
  CHECK(out.entry == 7);
  CHECK(out.segments == 16);
  CHECK(out.segment == 15);
  CHECK_FALSE(decode_immediate(0x0000ffffu, &out, &error));
  CHECK_THAT(error, Catch::Contains("target 0"));
  imm.segments = 2;
  imm.segment = 3;
  CHECK_FALSE(decode_immediate(encode_immediate(imm), &out, &error));
  CHECK_THAT(error, Catch::Contains("segment 3 of 2"));
}

TEST_CASE("protocol choice: auto prefers rdma only on RDMA-class providers", "[unit][rdma_wire]") {
  CHECK(decide_protocol("auto", "efa", true).protocol == Protocol::Rdma);
  CHECK(decide_protocol("auto", "verbs;ofi_rxm", true).protocol == Protocol::Rdma);
  CHECK(decide_protocol("auto", "tcp;ofi_rxm", true).protocol == Protocol::Tagged);
  CHECK(decide_protocol("auto", "efa", false).protocol == Protocol::Tagged);
  CHECK(decide_protocol("tagged", "efa", true).protocol == Protocol::Tagged);
  CHECK(decide_protocol("rdma", "tcp;ofi_rxm", true).protocol == Protocol::Rdma);
  ProtocolChoice refused = decide_protocol("rdma", "udp;ofi_rxd", false);
  CHECK(refused.protocol == Protocol::Tagged);
  CHECK_THAT(refused.reason, Catch::Contains("offers no RMA writes"));
}
