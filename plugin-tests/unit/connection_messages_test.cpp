#include "ofi/connection_messages.h"

#include <catch2/catch.hpp>
#include <cstring>
#include <random>
#include <vector>

#include "ofi/tag_layout.h"

using namespace weft::ofi;

namespace {

ListenHandle sample_handle() {
  ListenHandle handle;
  handle.provider_hash = 0xabcdef01;
  handle.listen_id = 42;
  handle.address_size = 16;
  for (int i = 0; i < 16; ++i) handle.address[i] = static_cast<uint8_t>(i + 1);
  return handle;
}

}  // namespace

TEST_CASE("a listen handle survives encoding", "[unit][handle]") {
  uint8_t bytes[weft::kHandleSize];
  encode_handle(sample_handle(), bytes);
  ListenHandle decoded;
  std::string error;
  REQUIRE(decode_handle(bytes, sizeof(bytes), &decoded, &error));
  CHECK(decoded.provider_hash == 0xabcdef01);
  CHECK(decoded.listen_id == 42);
  CHECK(decoded.connect_cookie == 0);
  REQUIRE(decoded.address_size == 16);
  CHECK(std::memcmp(decoded.address, sample_handle().address, 16) == 0);
}

TEST_CASE("the connect cookie is stored in the handle and nowhere else", "[unit][handle]") {
  uint8_t bytes[weft::kHandleSize];
  encode_handle(sample_handle(), bytes);
  uint8_t before[weft::kHandleSize];
  std::memcpy(before, bytes, sizeof(bytes));
  store_connect_cookie(bytes, 0x1122334455667788ull);
  ListenHandle decoded;
  std::string error;
  REQUIRE(decode_handle(bytes, sizeof(bytes), &decoded, &error));
  CHECK(decoded.connect_cookie == 0x1122334455667788ull);
  CHECK(std::memcmp(bytes, before, 16) == 0);
  CHECK(std::memcmp(bytes + 24, before + 24, sizeof(bytes) - 24) == 0);
}

TEST_CASE("corrupt and truncated handles are rejected with a reason", "[unit][handle]") {
  uint8_t bytes[weft::kHandleSize];
  encode_handle(sample_handle(), bytes);
  ListenHandle decoded;
  std::string error;

  SECTION("truncated") {
    CHECK_FALSE(decode_handle(bytes, 100, &decoded, &error));
    CHECK(error == "handle is truncated (100 of 128 bytes)");
  }
  SECTION("null") {
    CHECK_FALSE(decode_handle(nullptr, 128, &decoded, &error));
  }
  SECTION("bad magic") {
    bytes[0] ^= 0xff;
    CHECK_FALSE(decode_handle(bytes, sizeof(bytes), &decoded, &error));
    CHECK(error == "handle is not a weft listen handle (bad magic)");
  }
  SECTION("other wire version") {
    bytes[4] = 9;
    CHECK_FALSE(decode_handle(bytes, sizeof(bytes), &decoded, &error));
    CHECK(error.find("wire version 9") != std::string::npos);
  }
  SECTION("address too long") {
    bytes[5] = 200;
    CHECK_FALSE(decode_handle(bytes, sizeof(bytes), &decoded, &error));
    CHECK(error == "handle carries an invalid address size 200");
  }
  SECTION("empty address") {
    bytes[5] = 0;
    CHECK_FALSE(decode_handle(bytes, sizeof(bytes), &decoded, &error));
  }
  SECTION("listen id zero") {
    std::memset(bytes + 12, 0, 4);
    CHECK_FALSE(decode_handle(bytes, sizeof(bytes), &decoded, &error));
    CHECK(error == "handle carries an invalid listen id");
  }
}

TEST_CASE("random bytes never decode into an out-of-range handle", "[unit][handle]") {
  std::mt19937 random(1234);
  for (int round = 0; round < 20000; ++round) {
    uint8_t bytes[weft::kHandleSize];
    for (auto& byte : bytes) byte = static_cast<uint8_t>(random());
    if (round % 2 == 0) std::memcpy(bytes, "WFT1\x01", 5);  // get past the magic half the time
    ListenHandle decoded;
    std::string error;
    if (decode_handle(bytes, sizeof(bytes), &decoded, &error)) {
      CHECK(decoded.address_size >= 1);
      CHECK(decoded.address_size <= kMaxAddressSize);
      CHECK(decoded.listen_id >= 1);
      CHECK(decoded.listen_id <= kMaxCommId);
    } else {
      CHECK_FALSE(error.empty());
    }
  }
}

TEST_CASE("connect requests and acknowledgements round-trip and reject garbage", "[unit][handle]") {
  ConnectRequest request;
  request.connector_comm_id = 77;
  request.address_size = 3;
  request.address[0] = 9;
  request.address[2] = 5;
  uint8_t bytes[kConnectRequestSize];
  encode_connect_request(request, bytes);
  ConnectRequest decoded;
  std::string error;
  REQUIRE(decode_connect_request(bytes, sizeof(bytes), &decoded, &error));
  CHECK(decoded.connector_comm_id == 77);
  CHECK(decoded.address_size == 3);
  CHECK(decoded.address[2] == 5);

  CHECK_FALSE(decode_connect_request(bytes, 10, &decoded, &error));
  CHECK(error == "connect request is truncated (10 bytes)");
  bytes[5] = 0xff;
  CHECK_FALSE(decode_connect_request(bytes, sizeof(bytes), &decoded, &error));
  CHECK(error == "connect request carries an invalid address size 255");

  ConnectAck ack;
  ack.recv_comm_id = 5;
  uint8_t ack_bytes[kConnectAckSize];
  encode_connect_ack(ack, ack_bytes);
  ConnectAck decoded_ack;
  REQUIRE(decode_connect_ack(ack_bytes, sizeof(ack_bytes), &decoded_ack, &error));
  CHECK(decoded_ack.recv_comm_id == 5);
  ack_bytes[0] = 0;
  CHECK_FALSE(decode_connect_ack(ack_bytes, sizeof(ack_bytes), &decoded_ack, &error));
  CHECK(error == "connect acknowledgement has a bad magic or wire version");
}

TEST_CASE("tags of different comms and kinds never collide", "[unit][tags]") {
  CHECK(data_tag(1, 0) != data_tag(2, 0));
  CHECK(data_tag(1, 5) != data_tag(1, 6));
  CHECK(data_tag(1, -1) == ((1ull << 32) | 0xffffffffull));
  CHECK((data_tag(kMaxCommId, -1) & kControlBit) == 0);
  CHECK(connect_tag(1) != ack_tag(1));
  CHECK((connect_tag(1) & kControlBit) != 0);
  CHECK((ack_tag(1) & kControlBit) != 0);
}
