// The verbs transport's wire formats: connection info, clear-to-send
// groups and immediates, with every rejection checked by its message.
#include <arpa/inet.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstring>

#include "verbs/cts_grace.h"
#include "verbs/wire.h"

using namespace weft::verbs;

namespace {

ConnectionInfo sample_info() {
  ConnectionInfo info;
  info.role = Role::Sender;
  info.link_layer = LinkLayer::Ethernet;
  info.qp_count = 4;
  info.mtu = 3;
  info.lid = 0;
  info.listen_id = 77;
  info.secret = 0x0badc0ffee0ddf00ull;
  for (int i = 0; i < 16; ++i) info.gid[i] = static_cast<uint8_t>(i + 1);
  for (int q = 0; q < 4; ++q) info.qpn[q] = 0x100 + static_cast<uint32_t>(q);
  info.fifo_address = 0x7f0000001000;
  info.fifo_rkey = 0xabcd;
  info.split_data = true;
  return info;
}

weft::SocketAddress ten_one_two_three() {
  in_addr address{};
  address.s_addr = htonl(0x0a010203);
  return weft::SocketAddress::from_ipv4(address, 4567);
}

std::string decode_error(const uint8_t* bytes, Role expected = Role::Sender) {
  ConnectionInfo out;
  std::string error;
  REQUIRE_FALSE(decode_connection_info(bytes, kConnectionInfoSize, expected, &out, &error));
  return error;
}

}  // namespace

TEST_CASE("connection info round-trips every field", "[unit][verbs_wire]") {
  const ConnectionInfo in = sample_info();
  uint8_t bytes[kConnectionInfoSize];
  encode_connection_info(in, bytes);
  ConnectionInfo out;
  std::string error;
  REQUIRE(decode_connection_info(bytes, sizeof(bytes), Role::Sender, &out, &error));
  CHECK(out.role == Role::Sender);
  CHECK(out.link_layer == LinkLayer::Ethernet);
  CHECK(out.qp_count == 4);
  CHECK(out.mtu == 3);
  CHECK(out.listen_id == 77);
  CHECK(out.secret == 0x0badc0ffee0ddf00ull);
  CHECK(std::memcmp(out.gid, in.gid, 16) == 0);
  for (int q = 0; q < 4; ++q) CHECK(out.qpn[q] == 0x100u + static_cast<uint32_t>(q));
  CHECK(out.qpn[4] == 0);
  CHECK(out.fifo_address == 0x7f0000001000);
  CHECK(out.fifo_rkey == 0xabcd);
  CHECK(out.split_data);
  CHECK_FALSE(out.adaptive_routing);
  CHECK_FALSE(out.ece);
  CHECK(out.ece_vendor_id == 0);

  ConnectionInfo with_ece = in;
  with_ece.ece = true;
  with_ece.ece_vendor_id = 0x15b3;
  with_ece.ece_options = 0x80000007;
  encode_connection_info(with_ece, bytes);
  REQUIRE(decode_connection_info(bytes, sizeof(bytes), Role::Sender, &out, &error));
  CHECK(out.ece);
  CHECK(out.ece_vendor_id == 0x15b3);
  CHECK(out.ece_options == 0x80000007);
  CHECK(out.process.token == 0);  // none offered

  CHECK(out.link_key == 0);

  ConnectionInfo with_link = in;
  with_link.process.token = 0x1122334455667788;
  with_link.process.address = ten_one_two_three();
  with_link.link_key = 0x8877665544332211;
  encode_connection_info(with_link, bytes);
  REQUIRE(decode_connection_info(bytes, sizeof(bytes), Role::Sender, &out, &error));
  CHECK(out.process.token == 0x1122334455667788);
  CHECK(out.process.address.text() == "10.1.2.3:4567");
  CHECK(out.link_key == 0x8877665544332211);
}

TEST_CASE("connection info: a malformed liveness identity is refused", "[unit][verbs_wire]") {
  ConnectionInfo with_link = sample_info();
  with_link.process.token = 42;
  with_link.process.address = ten_one_two_three();
  with_link.link_key = 43;
  uint8_t b[kConnectionInfoSize];
  encode_connection_info(with_link, b);
  b[136] = 0xee;  // the address's family
  CHECK(decode_error(b).rfind("liveness identity: peer identity: ", 0) == 0);
  encode_connection_info(sample_info(), b);
  b[140] = 1;  // an address without a token
  CHECK(decode_error(b) == "liveness address without a token");
  // A link key comes with a liveness identity, and only with one.
  with_link.link_key = 0;
  encode_connection_info(with_link, b);
  CHECK(decode_error(b) == "a liveness identity without a link key");
  ConnectionInfo key_alone = sample_info();
  key_alone.link_key = 5;
  encode_connection_info(key_alone, b);
  CHECK(decode_error(b) == "a link key without a liveness identity");
}

TEST_CASE("connection info: each malformed field is refused by name", "[unit][verbs_wire]") {
  uint8_t good[kConnectionInfoSize];
  encode_connection_info(sample_info(), good);
  uint8_t b[kConnectionInfoSize];
  auto reset = [&] { std::memcpy(b, good, sizeof(b)); };

  ConnectionInfo out;
  std::string error;
  CHECK_FALSE(decode_connection_info(good, 167, Role::Sender, &out, &error));
  CHECK(error == "connection info of 167 bytes, expected 168");
  reset();
  b[0] ^= 1;
  CHECK(decode_error(b).find("bad magic") != std::string::npos);
  reset();
  b[4] = 9;
  CHECK(decode_error(b) == "connection info version 9, this weft speaks 4 (mixed weft versions?)");
  reset();
  b[5] = 4;
  CHECK(decode_error(b) == "unknown role 4");
  reset();
  CHECK(decode_error(b, Role::Receiver) ==
        "connection info from a sender, expected one from a receiver");
  reset();
  b[6] = 7;
  CHECK(decode_error(b) == "unknown link layer 7");
  reset();
  b[7] = 0;
  CHECK(decode_error(b) == "queue pair count 0, must be 1..16");
  reset();
  b[7] = 17;
  CHECK(decode_error(b) == "queue pair count 17, must be 1..16");
  reset();
  b[8] = 6;
  CHECK(decode_error(b) == "MTU code 6, must be 1 (256) .. 5 (4096)");
  reset();
  b[9] = 8;
  CHECK(decode_error(b) == "unknown flags 8");
  reset();
  b[113] = 1;  // ECE vendor id without the ECE flag
  CHECK(decode_error(b) == "ECE vendor id/options without the ECE flag");
  reset();
  b[119] = 1;
  CHECK(decode_error(b) == "ECE vendor id/options without the ECE flag");
  reset();
  b[44] = 1;
  CHECK(decode_error(b) == "nonzero reserved bytes");
  reset();
  b[5] = static_cast<uint8_t>(Role::Receiver);  // with the sender's secret at 120
  CHECK(decode_error(b, Role::Receiver) == "a receiver that sends a listen secret");
  reset();
  std::memset(b + 12, 0, 4);
  CHECK(decode_error(b) == "listen id 0");
  reset();
  std::memset(b + 16, 0, 16);
  CHECK(decode_error(b) == "RoCE peer without a GID");
  reset();
  std::memset(b + 32, 0, 8);
  CHECK(decode_error(b) == "FIFO address 0");
  reset();
  b[44] = 1;
  CHECK(decode_error(b) == "nonzero reserved bytes");
  reset();
  std::memset(b + 48 + 4, 0, 4);
  CHECK(decode_error(b) == "queue pair number 0 at 1 is not a 24-bit QPN");
  reset();
  b[48 + 3] = 1;  // QPN 0x01000100
  CHECK(decode_error(b) == "queue pair number 16777472 at 0 is not a 24-bit QPN");
  reset();
  b[48 + 4 * 5] = 1;
  CHECK(decode_error(b) == "queue pair number at 5 beyond the count 4");

  ConnectionInfo ib = sample_info();
  ib.link_layer = LinkLayer::InfiniBand;
  std::memset(ib.gid, 0, 16);
  ib.lid = 0;
  encode_connection_info(ib, b);
  CHECK(decode_error(b) == "InfiniBand peer with neither LID nor GID");
  ib.lid = 5;
  encode_connection_info(ib, b);
  CHECK(decode_connection_info(b, sizeof(b), Role::Sender, &out, &error));
}

TEST_CASE("connection info of a one-sided rank: one queue pair, no FIFO", "[unit][verbs_wire]") {
  ConnectionInfo info = sample_info();
  info.role = Role::OneSided;
  info.qp_count = 1;
  for (int q = 1; q < 4; ++q) info.qpn[q] = 0;
  info.split_data = false;
  info.fifo_address = 0;
  info.fifo_rkey = 0;
  uint8_t bytes[kConnectionInfoSize];
  encode_connection_info(info, bytes);
  ConnectionInfo out;
  std::string error;
  INFO(error);
  REQUIRE(decode_connection_info(bytes, kConnectionInfoSize, Role::OneSided, &out, &error));
  CHECK(out.role == Role::OneSided);
  CHECK(out.qpn[0] == info.qpn[0]);
  CHECK(decode_error(bytes, Role::Sender) ==
        "connection info from a one-sided rank, expected one from a sender");
  info.fifo_address = 0x1000;
  encode_connection_info(info, bytes);
  CHECK(decode_error(bytes, Role::OneSided) == "a FIFO from a one-sided rank");
  info.fifo_address = 0;
  info.fifo_rkey = 5;
  encode_connection_info(info, bytes);
  CHECK(decode_error(bytes, Role::OneSided) == "a FIFO from a one-sided rank");
  // A sender without its FIFO is still refused.
  info = sample_info();
  info.fifo_address = 0;
  encode_connection_info(info, bytes);
  CHECK(decode_error(bytes) == "FIFO address 0");
}

TEST_CASE("clear-to-send groups: ready only when complete and consistent", "[unit][verbs_wire]") {
  FifoEntry fifo[weft::kMaxRecvs] = {};
  const uint32_t sequence = 41;
  int count = 0;
  std::string error;
  // Nothing written yet (and zeroed memory never matches sequence 0 either).
  CHECK(check_cts_group(fifo, sequence, &count, &error) == CtsState::NotYet);
  CHECK(check_cts_group(fifo, 0, &count, &error) == CtsState::NotYet);
  for (int i = 0; i < 3; ++i) {
    fifo[i] = FifoEntry{0x1000u * (i + 1),       4096, 7, 10 + i, cts_sequence(sequence), 3,
                        static_cast<uint8_t>(i), 0};
  }
  fifo[2].sequence = cts_sequence(sequence - 32);  // the last entry still old
  CHECK(check_cts_group(fifo, sequence, &count, &error) == CtsState::NotYet);
  fifo[2].sequence = cts_sequence(sequence);
  REQUIRE(check_cts_group(fifo, sequence, &count, &error) == CtsState::Ready);
  CHECK(count == 3);

  fifo[1].index = 2;
  CHECK(check_cts_group(fifo, sequence, &count, &error) == CtsState::Invalid);
  CHECK(error == "clear-to-send entry 1 of receive 41 is inconsistent (count 3, index 2)");
  fifo[1].index = 1;
  fifo[1].count = 2;
  CHECK(check_cts_group(fifo, sequence, &count, &error) == CtsState::Invalid);
  fifo[1].count = 3;
  fifo[2].reserved = 1;
  CHECK(check_cts_group(fifo, sequence, &count, &error) == CtsState::Invalid);
  fifo[2].reserved = 0;
  fifo[2].address = ~uint64_t{0} - 10;
  CHECK(check_cts_group(fifo, sequence, &count, &error) == CtsState::Invalid);
  CHECK(error == "clear-to-send entry 2 of receive 41 wraps the address space");
  fifo[2].address = 0x3000;
  for (uint8_t bad : {uint8_t{0}, uint8_t{9}}) {
    fifo[0].count = bad;
    CHECK(check_cts_group(fifo, sequence, &count, &error) == CtsState::Invalid);
    CHECK(error ==
          "clear-to-send for receive 41 announces " + std::to_string(bad) + " buffers (1..8)");
  }
  // The sequence wraps without ever writing 0.
  CHECK(cts_sequence(0xffffffffu) == 1);
  CHECK(fifo_slot(33) == 1);
}

TEST_CASE("immediates: a size for one receive, a marker for groups, checked",
          "[unit][verbs_wire]") {
  size_t size = 0;
  std::string error;
  CHECK(immediate_for(1, 4096, 5) == 4096);
  CHECK(decode_immediate(4096, 1, 5, 8192, &size, &error) == ImmKind::Size);
  CHECK(size == 4096);
  CHECK(decode_immediate(0, 1, 5, 0, &size, &error) == ImmKind::Size);
  CHECK(size == 0);
  CHECK(decode_immediate(8193, 1, 5, 8192, &size, &error) == ImmKind::Truncated);
  CHECK(error == "message truncated: the peer sent 8193 bytes to a receive of 8192");

  const uint32_t group = immediate_for(3, 10, 0x80000005u);
  CHECK(group == (kImmSizesInFifo | 5u));
  CHECK(decode_immediate(group, 3, 0x80000005u, 0, &size, &error) == ImmKind::SizesInFifo);
  CHECK(decode_immediate(group, 3, 6, 0, &size, &error) == ImmKind::Invalid);
  CHECK(error == "immediate names receive 5, expected 6");
  CHECK(decode_immediate(100, 2, 5, 4096, &size, &error) == ImmKind::Invalid);
  CHECK(error == "immediate carries a size (100) for a group of 2 receives");
  // A single message too large for 31 bits goes through the sizes FIFO.
  CHECK(immediate_for(1, size_t{1} << 31, 9) == (kImmSizesInFifo | 9u));
}

TEST_CASE("an invalid clear-to-send fails only once it stays invalid for the grace",
          "[unit][verbs]") {
  using weft::verbs::InvalidCtsGrace;
  InvalidCtsGrace grace;
  const auto t0 = InvalidCtsGrace::Clock::now();
  const auto almost = InvalidCtsGrace::kGrace - std::chrono::milliseconds(1);
  // A torn read: invalid now, whole by the next look.
  CHECK(grace.settling(7, t0));
  CHECK(grace.settling(7, t0 + almost));
  CHECK_FALSE(grace.settling(7, t0 + InvalidCtsGrace::kGrace));
  // Another group's first invalid read starts its own grace.
  CHECK(grace.settling(8, t0 + InvalidCtsGrace::kGrace));
  CHECK_FALSE(grace.settling(8, t0 + 2 * InvalidCtsGrace::kGrace));
  // Read as valid in between: the next invalid read of the same sequence
  // (after the counter wrapped) starts again.
  grace.clear();
  CHECK(grace.settling(8, t0 + 3 * InvalidCtsGrace::kGrace));
}
