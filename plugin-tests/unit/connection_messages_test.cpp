#include "ofi/connection_messages.h"

#include <catch2/catch.hpp>
#include <cstring>
#include <random>
#include <vector>

#include "ofi/tag_layout.h"

using namespace weft::ofi;

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
  CHECK((data_tag(weft::kMaxCommId, -1) & kControlBit) == 0);
  CHECK(connect_tag(1) != ack_tag(1));
  CHECK((connect_tag(1) & kControlBit) != 0);
  CHECK((ack_tag(1) & kControlBit) != 0);
}
