#include "ofi/wire/connection_messages.h"

#include <arpa/inet.h>

#include <catch2/catch.hpp>
#include <cstring>
#include <random>
#include <vector>

#include "ofi/endpoint/tag_layout.h"

using namespace weft::ofi;

TEST_CASE("connect requests and acknowledgements round-trip and reject garbage", "[unit][handle]") {
  ConnectRequest request;
  request.listener_id = 12;
  request.connector_comm_id = 77;
  request.secret = 0xfeedfacecafebeefull;
  request.address_size = 3;
  request.address[0] = 9;
  request.address[2] = 5;
  uint8_t bytes[kConnectRequestSize];
  encode_connect_request(request, bytes);
  ConnectRequest decoded;
  std::string error;
  REQUIRE(decode_connect_request(bytes, sizeof(bytes), &decoded, &error));
  CHECK(decoded.connector_comm_id == 77);
  CHECK(decoded.listener_id == 12);
  CHECK(decoded.address_size == 3);
  CHECK(decoded.address[2] == 5);
  CHECK(decoded.secret == 0xfeedfacecafebeefull);

  bytes[4] = 4;
  CHECK_FALSE(decode_connect_request(bytes, sizeof(bytes), &decoded, &error));
  CHECK(error ==
        "connect request has wire version 4, this weft speaks 7 (mixed weft versions across "
        "nodes?)");
  bytes[4] = kWireVersion;
  bytes[24 + 3] = 1;
  CHECK_FALSE(decode_connect_request(bytes, sizeof(bytes), &decoded, &error));
  CHECK(error == "connect request has non-zero bytes beyond its address");
  bytes[24 + 3] = 0;
  bytes[12] = 0;
  CHECK_FALSE(decode_connect_request(bytes, sizeof(bytes), &decoded, &error));
  CHECK(error == "connect request names an invalid listener id");
  bytes[12] = 12;
  REQUIRE(decode_connect_request(bytes, sizeof(bytes), &decoded, &error));

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
  CHECK(error == "connect acknowledgement has a bad magic");

  request.rails = 9;
  encode_connect_request(request, bytes);
  CHECK_FALSE(decode_connect_request(bytes, sizeof(bytes), &decoded, &error));
  CHECK(error == "connect request offers 9 rails (1..8)");
}

TEST_CASE("connect messages carry the link key with the liveness identity, and only with it",
          "[unit][handle]") {
  ConnectRequest request;
  request.listener_id = 1;
  request.connector_comm_id = 3;
  request.address_size = 4;
  request.process.token = 0x77;
  in_addr loopback{};
  loopback.s_addr = htonl(INADDR_LOOPBACK);
  request.process.address = weft::SocketAddress::from_ipv4(loopback, 4000);
  request.link_key = 0xabcdef0123456789ull;
  uint8_t bytes[kConnectRequestSize];
  encode_connect_request(request, bytes);
  ConnectRequest decoded;
  std::string error;
  REQUIRE(decode_connect_request(bytes, sizeof(bytes), &decoded, &error));
  CHECK(decoded.link_key == 0xabcdef0123456789ull);
  CHECK(decoded.process.token == 0x77);
  request.link_key = 0;
  encode_connect_request(request, bytes);
  CHECK_FALSE(decode_connect_request(bytes, sizeof(bytes), &decoded, &error));
  CHECK(error == "connect request offers a liveness link without a link key");

  ConnectAck ack;
  ack.recv_comm_id = 5;
  ack.link_key = 9;  // no identity
  uint8_t ack_bytes[kConnectAckSize];
  encode_connect_ack(ack, ack_bytes);
  ConnectAck decoded_ack;
  CHECK_FALSE(decode_connect_ack(ack_bytes, sizeof(ack_bytes), &decoded_ack, &error));
  CHECK(error == "connect acknowledgement carries a link key without a liveness link");
  ack.process = request.process;
  encode_connect_ack(ack, ack_bytes);
  REQUIRE(decode_connect_ack(ack_bytes, sizeof(ack_bytes), &decoded_ack, &error));
  CHECK(decoded_ack.link_key == 9);
}

TEST_CASE("multi-rail acknowledgements carry every rail's target and address", "[unit][handle]") {
  ConnectAck ack;
  ack.recv_comm_id = 9;
  ack.protocol = Protocol::Rdma;
  ack.rails = 3;
  ack.eager_size = 8192;
  for (int r = 0; r < 3; ++r) ack.write_target[r] = static_cast<uint16_t>(100 + r);
  for (int r = 1; r < 3; ++r) {
    ack.address_size[r] = static_cast<uint8_t>(16 + r);
    std::memset(ack.address[r], 0x40 + r, ack.address_size[r]);
  }
  uint8_t bytes[kConnectAckSize];
  encode_connect_ack(ack, bytes);
  ConnectAck decoded;
  std::string error;
  REQUIRE(decode_connect_ack(bytes, sizeof(bytes), &decoded, &error));
  CHECK(decoded.rails == 3);
  for (int r = 0; r < 3; ++r) CHECK(decoded.write_target[r] == 100 + r);
  for (int r = 1; r < 3; ++r) {
    REQUIRE(decoded.address_size[r] == 16 + r);
    CHECK(std::memcmp(decoded.address[r], ack.address[r], decoded.address_size[r]) == 0);
  }

  auto refused = [&](const uint8_t* corrupt, const char* reason) {
    ConnectAck out;
    std::string why;
    CHECK_FALSE(decode_connect_ack(corrupt, kConnectAckSize, &out, &why));
    CHECK_THAT(why, Catch::Contains(reason));
  };
  uint8_t corrupt[kConnectAckSize];
  std::memcpy(corrupt, bytes, sizeof(bytes));
  corrupt[7] = 0;
  refused(corrupt, "names 0 rails");
  std::memcpy(corrupt, bytes, sizeof(bytes));
  corrupt[24 + 2] = 0;  // rail 2's write target
  corrupt[24 + 3] = 0;
  refused(corrupt, "no write target on rail 2");
  std::memcpy(corrupt, bytes, sizeof(bytes));
  corrupt[40 + kAckRailStride] = 0;  // rail 2's address size
  refused(corrupt, "invalid address size 0 for rail 2");
  std::memcpy(corrupt, bytes, sizeof(bytes));
  corrupt[40 + 2 * kAckRailStride + 8] = 1;  // rail 3 is not in use
  refused(corrupt, "non-zero bytes beyond rail 3");
  std::memcpy(corrupt, bytes, sizeof(bytes));
  corrupt[40 + 8 + 17] = 1;  // past rail 1's 17-byte address
  refused(corrupt, "non-zero bytes beyond rail 1");
}

TEST_CASE("tags of different comms and kinds never collide", "[unit][tags]") {
  CHECK(data_tag(1, 0) != data_tag(2, 0));
  CHECK(data_tag(1, 5) != data_tag(1, 6));
  CHECK(data_tag(1, -1) == ((1ull << 32) | 0xffffffffull));
  CHECK((data_tag(weft::kMaxCommId, -1) & kControlBit) == 0);
  CHECK(kConnectInboxTag != ack_tag(0));
  CHECK((kConnectInboxTag & kControlBit) != 0);
  CHECK((ack_tag(1) & kControlBit) != 0);
}

TEST_CASE("the listen payload carries the address and, where it fits, the process",
          "[unit][handle]") {
  ListenPayload payload;
  payload.address_size = 16;
  std::memset(payload.address, 0x42, 16);
  payload.process.token = 0x99;
  in_addr loopback{};
  loopback.s_addr = htonl(INADDR_LOOPBACK);
  payload.process.address = weft::SocketAddress::from_ipv4(loopback, 4100);
  uint8_t bytes[weft::kMaxHandlePayload];
  const size_t size = encode_listen_payload(payload, bytes);
  CHECK(size == 1 + 16 + weft::PeerIdentity::kPackedSize);
  ListenPayload decoded;
  std::string error;
  REQUIRE(decode_listen_payload(bytes, size, &decoded, &error));
  CHECK(decoded.address_size == 16);
  CHECK(decoded.address[15] == 0x42);
  CHECK(decoded.process.token == 0x99);
  CHECK(decoded.process.address.text() == payload.process.address.text());

  // Without the identity (no links, or an address too long for both).
  REQUIRE(decode_listen_payload(bytes, 17, &decoded, &error));
  CHECK(decoded.process.token == 0);
  payload.address_size = kMaxListenAddress;
  CHECK(encode_listen_payload(payload, bytes) == weft::kMaxHandlePayload);

  CHECK_FALSE(decode_listen_payload(bytes, 1, &decoded, &error));
  CHECK(error == "listen handle carries no valid address");
  bytes[0] = 16;
  CHECK_FALSE(decode_listen_payload(bytes, 20, &decoded, &error));
  CHECK(error ==
        "listen handle's payload of 20 bytes does not hold a 16-byte address (and a process "
        "identity)");
  std::memset(bytes + 17, 0, weft::PeerIdentity::kPackedSize);  // token 0 where one must be
  CHECK_FALSE(decode_listen_payload(bytes, 49, &decoded, &error));
  CHECK(error == "listen handle carries an empty process identity");
}
