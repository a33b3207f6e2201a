#include "core/handle_header.h"

#include <catch2/catch.hpp>
#include <cstring>
#include <random>

#include "core/comm_id.h"

using namespace weft;

namespace {

ListenHandle sample_handle() {
  ListenHandle handle;
  handle.transport = TransportId::Ofi;
  handle.fingerprint = 0xabcdef01;
  handle.listen_id = 42;
  handle.secret = 0x8badf00ddeadbeefull;
  handle.payload_size = 16;
  for (int i = 0; i < 16; ++i) handle.payload[i] = static_cast<uint8_t>(i + 1);
  return handle;
}

}  // namespace

TEST_CASE("a listen handle survives encoding", "[unit][handle]") {
  uint8_t bytes[kHandleSize];
  encode_handle(sample_handle(), bytes);
  ListenHandle decoded;
  std::string error;
  REQUIRE(decode_handle(bytes, sizeof(bytes), TransportId::Ofi, &decoded, &error));
  CHECK(decoded.transport == TransportId::Ofi);
  CHECK(decoded.fingerprint == 0xabcdef01);
  CHECK(decoded.listen_id == 42);
  CHECK(decoded.connect_cookie == 0);
  CHECK(decoded.secret == 0x8badf00ddeadbeefull);
  REQUIRE(decoded.payload_size == 16);
  CHECK(std::memcmp(decoded.payload, sample_handle().payload, 16) == 0);
}

TEST_CASE("the connect cookie is stored in the handle and nowhere else", "[unit][handle]") {
  uint8_t bytes[kHandleSize];
  encode_handle(sample_handle(), bytes);
  uint8_t before[kHandleSize];
  std::memcpy(before, bytes, sizeof(bytes));
  store_connect_cookie(bytes, 0x1122334455667788ull);
  ListenHandle decoded;
  std::string error;
  REQUIRE(decode_handle(bytes, sizeof(bytes), TransportId::Ofi, &decoded, &error));
  CHECK(decoded.connect_cookie == 0x1122334455667788ull);
  CHECK(std::memcmp(bytes, before, 16) == 0);
  CHECK(std::memcmp(bytes + 24, before + 24, sizeof(bytes) - 24) == 0);
}

TEST_CASE("corrupt, foreign and truncated handles are rejected with a reason", "[unit][handle]") {
  uint8_t bytes[kHandleSize];
  encode_handle(sample_handle(), bytes);
  ListenHandle decoded;
  std::string error;
  auto decode = [&] {
    return decode_handle(bytes, sizeof(bytes), TransportId::Ofi, &decoded, &error);
  };

  SECTION("truncated") {
    CHECK_FALSE(decode_handle(bytes, 100, TransportId::Ofi, &decoded, &error));
    CHECK(error == "handle is truncated (100 of 128 bytes)");
  }
  SECTION("null") {
    CHECK_FALSE(decode_handle(nullptr, 128, TransportId::Ofi, &decoded, &error));
  }
  SECTION("bad magic") {
    bytes[0] ^= 0xff;
    CHECK_FALSE(decode());
    CHECK(error == "handle is not a weft listen handle (bad magic)");
  }
  SECTION("a handle of the previous weft wire format") {
    std::memcpy(bytes, "WFT1", 4);
    CHECK_FALSE(decode());
    CHECK(error ==
          "handle comes from an older weft (wire version 1); use the same weft on every node");
  }
  SECTION("a handle of wire version 2, which carried no secret") {
    bytes[4] = 2;
    CHECK_FALSE(decode());
    CHECK(error ==
          "handle has wire version 2, this weft speaks 4 (mixed weft versions across nodes?)");
  }
  SECTION("no secret") {
    std::memset(bytes + 24, 0, 8);
    CHECK_FALSE(decode());
    CHECK(error == "handle carries no listen secret");
  }
  SECTION("other wire version") {
    bytes[4] = 9;
    CHECK_FALSE(decode());
    CHECK(error.find("wire version 9") != std::string::npos);
  }
  SECTION("another transport's handle") {
    bytes[5] = static_cast<uint8_t>(TransportId::Verbs);
    CHECK_FALSE(decode());
    CHECK(error ==
          "handle comes from weft's verbs transport, this process uses ofi (libfabric) (set the "
          "same WEFT_TRANSPORT on every node)");
  }
  SECTION("unknown transport") {
    bytes[5] = 77;
    CHECK_FALSE(decode());
    CHECK(error == "handle names an unknown weft transport 77");
  }
  SECTION("payload too long") {
    bytes[6] = 200;
    CHECK_FALSE(decode());
    CHECK(error == "handle carries an invalid payload size 200");
  }
  SECTION("empty payload") {
    bytes[6] = 0;
    CHECK_FALSE(decode());
  }
  SECTION("reserved byte set") {
    bytes[7] = 1;
    CHECK_FALSE(decode());
    CHECK(error == "handle has non-zero reserved bytes (corrupted in transit?)");
  }
  SECTION("garbage after the payload") {
    bytes[kHandleSize - 1] = 0x5a;
    CHECK_FALSE(decode());
    CHECK(error == "handle has non-zero reserved bytes (corrupted in transit?)");
  }
  SECTION("listen id zero") {
    std::memset(bytes + 12, 0, 4);
    CHECK_FALSE(decode());
    CHECK(error == "handle carries an invalid listen id");
  }
  SECTION("listen id above the comm id range") {
    std::memset(bytes + 12, 0xff, 4);
    CHECK_FALSE(decode());
    CHECK(error == "handle carries an invalid listen id");
  }
}

TEST_CASE("random bytes never decode into an out-of-range handle", "[unit][handle]") {
  std::mt19937 random(1234);
  int accepted = 0;
  for (int round = 0; round < 20000; ++round) {
    uint8_t bytes[kHandleSize];
    for (auto& byte : bytes) byte = static_cast<uint8_t>(random());
    if (round % 2 == 0) {
      // Get past the header checks half the time, so the later ones run.
      std::memcpy(bytes, "WFT2\x04\x01", 6);
      bytes[6] = static_cast<uint8_t>(1 + random() % 110);
      bytes[7] = 0;
      if (round % 4 == 0 && bytes[6] <= kMaxHandlePayload)
        std::memset(bytes + kHandleHeaderSize + bytes[6], 0, kMaxHandlePayload - bytes[6]);
    }
    ListenHandle decoded;
    std::string error;
    if (decode_handle(bytes, sizeof(bytes), TransportId::Ofi, &decoded, &error)) {
      ++accepted;
      CHECK(decoded.payload_size >= 1);
      CHECK(decoded.payload_size <= kMaxHandlePayload);
      CHECK(valid_comm_id(decoded.listen_id));
      CHECK(decoded.secret != 0);
    } else {
      CHECK_FALSE(error.empty());
    }
  }
  CHECK(accepted > 0);  // the generator does reach the accepting path
}
