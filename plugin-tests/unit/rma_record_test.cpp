// One-sided setup records (core/rma_record.h): they round-trip, and only a
// record that carries its sender rank's listen secret proves it comes from
// the comm (docs/security.md).
#include "core/rma_record.h"

#include <catch2/catch.hpp>
#include <cstring>
#include <vector>

using namespace weft;

namespace {

RmaRecord window_from(uint32_t rank, uint64_t proof) {
  RmaRecord record;
  record.kind = RmaRecordKind::Window;
  record.rank = rank;
  record.ranks = 3;
  record.round = 4;
  record.address = 0x7f0000001000;
  record.key = 0xabcdef;
  record.size = 1 << 20;
  record.proof = proof;
  return record;
}

}  // namespace

TEST_CASE("a one-sided record round-trips with its proof", "[unit][rma_record]") {
  uint8_t bytes[kRmaRecordSize];
  encode_rma_record(window_from(1, 0x5ec2e7), bytes);
  RmaRecord expected = window_from(0, 0);
  RmaRecord out;
  std::string error;
  REQUIRE(decode_rma_record(bytes, sizeof bytes, expected, 0, &out, &error));
  CHECK(out.rank == 1);
  CHECK(out.address == 0x7f0000001000);
  CHECK(out.size == (1u << 20));
  CHECK(out.proof == 0x5ec2e7);
  bytes[5] = 1;  // a weft before proofs
  CHECK_FALSE(decode_rma_record(bytes, sizeof bytes, expected, 0, &out, &error));
  CHECK(error == "record version 1, this weft speaks 3");
  CHECK_FALSE(decode_rma_record(bytes, 48, expected, 0, &out, &error));
  CHECK(error == "48 bytes, a record has 56");
}

TEST_CASE("only the sender rank's own listen secret proves a record", "[unit][rma_record]") {
  const std::vector<uint64_t> secrets = {0x1111, 0x2222, 0x3333};
  uint8_t bytes[kRmaRecordSize];
  encode_rma_record(window_from(1, 0x2222), bytes);
  CHECK(rma_record_proven(bytes, sizeof bytes, secrets));
  // Another rank's secret, a guess, no secret at all.
  for (uint64_t proof : {uint64_t{0x1111}, uint64_t{0x3333}, uint64_t{0x2223}, uint64_t{0}}) {
    INFO("proof " << proof);
    encode_rma_record(window_from(1, proof), bytes);
    CHECK_FALSE(rma_record_proven(bytes, sizeof bytes, secrets));
  }
  // A rank the comm does not have, a short record, another magic.
  encode_rma_record(window_from(7, 0x2222), bytes);
  CHECK_FALSE(rma_record_proven(bytes, sizeof bytes, secrets));
  encode_rma_record(window_from(1, 0x2222), bytes);
  CHECK_FALSE(rma_record_proven(bytes, sizeof bytes - 1, secrets));
  bytes[0] ^= 1;
  CHECK_FALSE(rma_record_proven(bytes, sizeof bytes, secrets));
  CHECK_FALSE(rma_record_proven(bytes, sizeof bytes, {}));
}

TEST_CASE("an on-demand record is an ask or a window from another rank", "[unit][rma_record]") {
  uint8_t bytes[kRmaRecordSize];
  RmaRecord ask;
  ask.kind = RmaRecordKind::WindowAsk;
  ask.rank = 2;
  ask.ranks = 3;
  ask.round = 7;
  ask.proof = 0x3333;
  encode_rma_record(ask, bytes);
  RmaRecord out;
  std::string error;
  REQUIRE(decode_rma_on_demand_record(bytes, sizeof bytes, 3, 0, &out, &error));
  CHECK(out.kind == RmaRecordKind::WindowAsk);
  CHECK(out.round == 7);
  // An ask names no region: bytes that do are refused.
  bytes[40] = 1;
  CHECK_FALSE(decode_rma_on_demand_record(bytes, sizeof bytes, 3, 0, &out, &error));
  CHECK(error == "an ask record with a region (address 0x0, size 1)");
  // A window answers; a hello is never sent on demand; nor is this rank's own.
  encode_rma_record(window_from(1, 0x2222), bytes);
  REQUIRE(decode_rma_on_demand_record(bytes, sizeof bytes, 3, 0, &out, &error));
  CHECK(out.size == (1u << 20));
  CHECK_FALSE(decode_rma_on_demand_record(bytes, sizeof bytes, 3, 1, &out, &error));
  CHECK(error == "sender rank 1 is not another rank of 3");
  CHECK_FALSE(decode_rma_on_demand_record(bytes, sizeof bytes, 4, 0, &out, &error));
  CHECK(error == "the sender counts 3 ranks, this rank 4");
  RmaRecord hello = window_from(1, 0x2222);
  hello.kind = RmaRecordKind::Hello;
  encode_rma_record(hello, bytes);
  CHECK_FALSE(decode_rma_on_demand_record(bytes, sizeof bytes, 3, 0, &out, &error));
  CHECK(error == "a hello record, which a comm with windows on demand never sends");
  bytes[4] = 9;
  CHECK_FALSE(decode_rma_on_demand_record(bytes, sizeof bytes, 3, 0, &out, &error));
  CHECK(error == "unknown record kind 9 (hello 1, window 2, ask 3)");
}
