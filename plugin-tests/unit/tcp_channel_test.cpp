#include "core/tcp_channel.h"

#include <arpa/inet.h>
#include <net/if.h>
#include <sys/socket.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstring>
#include <functional>
#include <vector>

#include "core/socket_address.h"

using namespace weft;
using Progress = TcpStream::Progress;

namespace {

SocketAddress ipv4(const char* text, uint16_t port) {
  in_addr address{};
  REQUIRE(inet_pton(AF_INET, text, &address) == 1);
  return SocketAddress::from_ipv4(address, port);
}

SocketAddress ipv6(const char* text, uint16_t port, uint32_t scope_id = 0) {
  in6_addr address{};
  REQUIRE(inet_pton(AF_INET6, text, &address) == 1);
  return SocketAddress::from_ipv6(address, port, scope_id);
}

InterfaceAddress nic(const char* name, SocketAddress address, bool up = true,
                     bool loopback = false) {
  return InterfaceAddress{name, address, up, loopback};
}

// A few interfaces as a typical container host lists them.
std::vector<InterfaceAddress> host_interfaces() {
  return {
      nic("lo", ipv4("127.0.0.1", 0), true, true),
      nic("docker0", ipv4("172.17.0.1", 0)),
      nic("eth0", ipv6("fe80::1", 0, 2)),
      nic("eth0", ipv4("10.0.0.2", 0)),
      nic("eth1", ipv4("10.1.0.2", 0)),
      nic("ib0", ipv4("192.168.0.2", 0)),
      nic("ib0", ipv6("2001:db8::2", 0)),
  };
}

std::string pick(const std::vector<InterfaceAddress>& interfaces, const std::string& spec,
                 int family = AF_UNSPEC) {
  InterfaceAddress out;
  std::string error;
  REQUIRE(pick_from(interfaces, spec, family, &out, &error));
  return out.name + " " + out.address.text();
}

std::string pick_error(const std::vector<InterfaceAddress>& interfaces, const std::string& spec,
                       int family = AF_UNSPEC) {
  InterfaceAddress out;
  std::string error;
  REQUIRE_FALSE(pick_from(interfaces, spec, family, &out, &error));
  return error;
}

std::string unpack_error(const uint8_t* bytes, size_t size = SocketAddress::kPackedSize) {
  SocketAddress out;
  std::string error;
  REQUIRE_FALSE(SocketAddress::unpack(bytes, size, &out, &error));
  return error;
}

// Calls `step` until it is no longer Pending, for at most 10 seconds.
Progress drive(const std::function<Progress()>& step) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  Progress progress = step();
  while (progress == Progress::Pending && std::chrono::steady_clock::now() < deadline) {
    progress = step();
  }
  return progress;
}

struct Pair {
  std::unique_ptr<TcpListener> listener;
  TcpStream client;
  TcpStream server;
};

// A connected loopback pair, made only through the non-blocking calls.
Pair connected_pair() {
  Pair pair;
  std::string error;
  pair.listener = TcpListener::open(ipv4("127.0.0.1", 0), &error);
  REQUIRE(pair.listener != nullptr);
  REQUIRE(pair.listener->address().port() != 0);
  REQUIRE(TcpStream::connect(pair.listener->address(), &pair.client, &error));
  Progress accepted = drive([&] {
    if (!pair.server.valid() && !pair.listener->accept(&pair.server, &error)) {
      return Progress::Failed;
    }
    return pair.server.valid() ? Progress::Done : Progress::Pending;
  });
  INFO(error);
  REQUIRE(accepted == Progress::Done);
  REQUIRE(drive([&] { return pair.client.finish_connect(&error); }) == Progress::Done);
  return pair;
}

std::vector<uint8_t> pattern(size_t size, uint8_t seed) {
  std::vector<uint8_t> bytes(size);
  for (size_t i = 0; i < size; ++i) bytes[i] = static_cast<uint8_t>(i * 131 + seed + (i >> 12));
  return bytes;
}

}  // namespace

TEST_CASE("an IPv4 address packs to the documented layout and back", "[unit][tcp_channel]") {
  SocketAddress address = ipv4("10.1.2.3", 4567);
  CHECK(address.text() == "10.1.2.3:4567");
  uint8_t bytes[SocketAddress::kPackedSize];
  address.pack(bytes);
  const uint8_t expected[SocketAddress::kPackedSize] = {4,  0, 0x11, 0xd7, 0, 0, 0, 0,
                                                        10, 1, 2,    3,    0, 0, 0, 0};
  CHECK(std::memcmp(bytes, expected, sizeof(expected)) == 0);

  SocketAddress back;
  std::string error;
  REQUIRE(SocketAddress::unpack(bytes, sizeof(bytes), &back, &error));
  CHECK(back.family() == AF_INET);
  CHECK(back.port() == 4567);
  CHECK(back.text() == "10.1.2.3:4567");
  CHECK(back.length == sizeof(sockaddr_in));
}

TEST_CASE("an IPv6 address keeps its scope id through packing", "[unit][tcp_channel]") {
  SocketAddress address = ipv6("fe80::1", 4567, 0x01020304);
  uint8_t bytes[SocketAddress::kPackedSize];
  address.pack(bytes);
  const uint8_t head[8] = {6, 0, 0x11, 0xd7, 1, 2, 3, 4};
  CHECK(std::memcmp(bytes, head, sizeof(head)) == 0);
  CHECK(bytes[8] == 0xfe);
  CHECK(bytes[9] == 0x80);
  CHECK(bytes[23] == 1);

  SocketAddress back;
  std::string error;
  REQUIRE(SocketAddress::unpack(bytes, sizeof(bytes), &back, &error));
  CHECK(back.family() == AF_INET6);
  CHECK(back.port() == 4567);
  CHECK(reinterpret_cast<const sockaddr_in6*>(&back.storage)->sin6_scope_id == 0x01020304);
  CHECK(back.text() == "[fe80::1%16909060]:4567");  // no local interface has that index

  unsigned lo = if_nametoindex("lo");
  if (lo != 0) CHECK(ipv6("fe80::1", 4567, lo).text() == "[fe80::1%lo]:4567");
  CHECK(ipv6("2001:db8::7", 80).text() == "[2001:db8::7]:80");
}

TEST_CASE("unpack reads a longer payload's first 24 bytes", "[unit][tcp_channel]") {
  uint8_t bytes[40];
  std::memset(bytes, 0xee, sizeof(bytes));
  ipv4("192.168.1.1", 1).pack(bytes);
  SocketAddress back;
  std::string error;
  REQUIRE(SocketAddress::unpack(bytes, sizeof(bytes), &back, &error));
  CHECK(back.text() == "192.168.1.1:1");
}

TEST_CASE("unpack names each malformed field", "[unit][tcp_channel]") {
  uint8_t good[SocketAddress::kPackedSize];
  ipv4("10.1.2.3", 4567).pack(good);
  uint8_t bytes[SocketAddress::kPackedSize];
  auto fresh = [&] { std::memcpy(bytes, good, sizeof(bytes)); };

  fresh();
  CHECK(unpack_error(bytes, 23) == "packed socket address: 23 bytes, needs 24");
  bytes[0] = 5;
  CHECK(unpack_error(bytes) == "packed socket address: family byte is 5, not 4 or 6");
  bytes[0] = 0;  // what an empty address packs to
  CHECK(unpack_error(bytes) == "packed socket address: family byte is 0, not 4 or 6");
  fresh();
  bytes[1] = 9;
  CHECK(unpack_error(bytes) == "packed socket address: padding byte 1 is 9, not 0");
  fresh();
  bytes[2] = bytes[3] = 0;
  CHECK(unpack_error(bytes) == "packed socket address: port is 0");
  fresh();
  bytes[7] = 3;
  CHECK(unpack_error(bytes) == "packed socket address: IPv4 address with scope id 3, not 0");
  fresh();
  bytes[12] = 1;
  CHECK(unpack_error(bytes) ==
        "packed socket address: IPv4 address with nonzero byte 12 (bytes 12..23 must be 0)");
  fresh();
  bytes[23] = 1;
  CHECK(unpack_error(bytes) ==
        "packed socket address: IPv4 address with nonzero byte 23 (bytes 12..23 must be 0)");

  SocketAddress empty;
  empty.pack(bytes);
  CHECK(unpack_error(bytes) == "packed socket address: family byte is 0, not 4 or 6");
}

TEST_CASE("pick_from follows NCCL_SOCKET_IFNAME's syntax", "[unit][tcp_channel]") {
  auto interfaces = host_interfaces();
  SECTION("prefixes, in the interfaces' order") {
    CHECK(pick(interfaces, "eth") == "eth0 10.0.0.2:0");
    CHECK(pick(interfaces, "ib,eth") == "eth0 10.0.0.2:0");
    CHECK(pick(interfaces, "ib") == "ib0 192.168.0.2:0");
    CHECK(pick(interfaces, "doc") == "docker0 172.17.0.1:0");  // named, so allowed
  }
  SECTION("^ excludes") {
    CHECK(pick(interfaces, "^eth0,docker") == "eth1 10.1.0.2:0");
    CHECK(pick(interfaces, "^lo,docker,eth") == "ib0 192.168.0.2:0");
  }
  SECTION("= makes names exact") {
    std::vector<InterfaceAddress> list = {nic("eth01", ipv4("10.9.0.1", 0)),
                                          nic("eth0", ipv4("10.0.0.1", 0))};
    CHECK(pick(list, "eth0") == "eth01 10.9.0.1:0");
    CHECK(pick(list, "=eth0") == "eth0 10.0.0.1:0");
    CHECK(pick(list, "^=eth0") == "eth01 10.9.0.1:0");
    CHECK(pick(list, "^=eth01") == "eth0 10.0.0.1:0");
    CHECK(pick_error(list, "=eth").find("no usable IPv4 or IPv6 interface for '=eth'") == 0);
  }
  SECTION("a malformed list is refused") {
    CHECK(pick_error(interfaces, "^") == "interface list '^' names no interface");
    CHECK(pick_error(interfaces, "^=,") == "interface list '^=,' names no interface");
  }
  SECTION("down interfaces never count") {
    std::vector<InterfaceAddress> list = {nic("eth0", ipv4("10.0.0.1", 0), false),
                                          nic("eth1", ipv4("10.0.0.2", 0))};
    CHECK(pick(list, "") == "eth1 10.0.0.2:0");
    CHECK(pick(list, "eth") == "eth1 10.0.0.2:0");
  }
}

TEST_CASE("pick_from's default choice and preferences", "[unit][tcp_channel]") {
  SECTION("docker and virbr are skipped, lo comes last") {
    std::vector<InterfaceAddress> list = {
        nic("lo", ipv4("127.0.0.1", 0), true, true), nic("docker0", ipv4("172.17.0.1", 0)),
        nic("virbr0", ipv4("192.168.122.1", 0)), nic("enp1s0", ipv4("10.0.0.5", 0))};
    CHECK(pick(list, "") == "enp1s0 10.0.0.5:0");
  }
  SECTION("loopback only when nothing else is left") {
    std::vector<InterfaceAddress> list = {nic("docker0", ipv4("172.17.0.1", 0)),
                                          nic("lo", ipv4("127.0.0.1", 0), true, true)};
    CHECK(pick(list, "") == "lo 127.0.0.1:0");
    CHECK(pick(list, "^docker") == "lo 127.0.0.1:0");
  }
  SECTION("IPv4 before IPv6 unless a family is asked for") {
    std::vector<InterfaceAddress> list = {nic("eth0", ipv6("2001:db8::1", 0)),
                                          nic("eth1", ipv4("10.0.0.1", 0))};
    CHECK(pick(list, "", AF_UNSPEC) == "eth1 10.0.0.1:0");
    CHECK(pick(list, "", AF_INET) == "eth1 10.0.0.1:0");
    CHECK(pick(list, "", AF_INET6) == "eth0 [2001:db8::1]:0");
    CHECK(pick(host_interfaces(), "ib", AF_INET6) == "ib0 [2001:db8::2]:0");
  }
  SECTION("IPv6 link-local only when nothing else is") {
    std::vector<InterfaceAddress> list = {nic("eth0", ipv6("fe80::1", 0, 4000000)),
                                          nic("eth1", ipv6("2001:db8::1", 0)),
                                          nic("lo", ipv6("::1", 0), true, true)};
    CHECK(pick(list, "", AF_INET6) == "eth1 [2001:db8::1]:0");
    list.erase(list.begin() + 1);
    CHECK(pick(list, "", AF_INET6) == "eth0 [fe80::1%4000000]:0");  // still before lo
    CHECK(pick(list, "", AF_UNSPEC) == "eth0 [fe80::1%4000000]:0");
  }
  SECTION("an unknown family is refused") {
    CHECK(pick_error(host_interfaces(), "", AF_UNIX) ==
          "address family " + std::to_string(AF_UNIX) + " is not AF_INET, AF_INET6 or AF_UNSPEC");
  }
}

TEST_CASE("pick_from's failure lists what it saw and what to set", "[unit][tcp_channel]") {
  std::vector<InterfaceAddress> list = {nic("lo", ipv4("127.0.0.1", 0), false, true),
                                        nic("docker0", ipv4("172.17.0.1", 0)),
                                        nic("eth0", ipv6("2001:db8::1", 0))};
  CHECK(pick_error(list, "", AF_INET) ==
        "no usable IPv4 interface; interfaces seen: lo 127.0.0.1:0 (down), docker0 172.17.0.1:0 "
        "(docker*/virbr* skipped by default), eth0 [2001:db8::1]:0 (not IPv4). Set "
        "WEFT_SOCKET_IFNAME (or NCCL_SOCKET_IFNAME) to one of them");
  CHECK(pick_error(list, "ib") ==
        "no usable IPv4 or IPv6 interface for 'ib'; interfaces seen: lo 127.0.0.1:0 (down), "
        "docker0 172.17.0.1:0 (not in the list), eth0 [2001:db8::1]:0 (not in the list). Set "
        "WEFT_SOCKET_IFNAME (or NCCL_SOCKET_IFNAME) to one of them");
  CHECK(pick_error(list, "^eth,docker").find("eth0 [2001:db8::1]:0 (excluded by the list)") !=
        std::string::npos);
  CHECK(pick_error({}, "") ==
        "no usable IPv4 or IPv6 interface; interfaces seen: none. Set WEFT_SOCKET_IFNAME (or "
        "NCCL_SOCKET_IFNAME) to one of them");
}

TEST_CASE("pick_local_address finds an address on this machine", "[unit][tcp_channel]") {
  SocketAddress address;
  std::string ifname;
  std::string error;
  bool found = pick_local_address("", AF_UNSPEC, &address, &ifname, &error);
  INFO(error);
  REQUIRE(found);
  CHECK(!ifname.empty());
  CHECK((address.family() == AF_INET || address.family() == AF_INET6));
  CHECK(address.port() == 0);
  // The choice can be listened on.
  auto listener = TcpListener::open(address, &error);
  INFO(address.text() + " on " + ifname + ": " + error);
  CHECK(listener != nullptr);

  REQUIRE(pick_local_address("lo", AF_INET, &address, &ifname, &error));
  CHECK(ifname == "lo");
  CHECK(address.text() == "127.0.0.1:0");
  REQUIRE_FALSE(pick_local_address("=no-such-interface", AF_UNSPEC, &address, &ifname, &error));
  CHECK(error.find("interfaces seen: ") != std::string::npos);
  CHECK(error.find("lo 127.0.0.1:0 (not in the list)") != std::string::npos);
}

TEST_CASE("1 MiB each way over loopback through non-blocking calls only", "[unit][tcp_channel]") {
  Pair pair = connected_pair();
  CHECK(pair.server.peer().text().rfind("127.0.0.1:", 0) == 0);
  CHECK(pair.client.peer().text() == pair.listener->address().text());

  // Nothing more is pending on the listener.
  TcpStream none;
  std::string error;
  REQUIRE(pair.listener->accept(&none, &error));
  CHECK_FALSE(none.valid());

  // Small socket buffers, so that no call can move a whole message at once.
  for (int fd : {pair.client.fd(), pair.server.fd()}) {
    int size = 16 << 10;
    REQUIRE(setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &size, sizeof(size)) == 0);
    REQUIRE(setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, sizeof(size)) == 0);
  }
  const auto to_server = pattern(1 << 20, 1);
  const auto to_client = pattern(1 << 20, 2);
  std::vector<uint8_t> at_server(to_server.size());
  std::vector<uint8_t> at_client(to_client.size());
  // Two messages in a row per direction: the offsets must restart after Done.
  for (int round = 0; round < 2; ++round) {
    Progress steps[4] = {Progress::Pending, Progress::Pending, Progress::Pending,
                         Progress::Pending};
    auto advance = [&](int i, const std::function<Progress()>& step) {
      if (steps[i] == Progress::Pending) steps[i] = step();
    };
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    auto all_done = [&] {
      for (Progress step : steps) {
        if (step != Progress::Done) return false;
      }
      return true;
    };
    int calls = 0;
    while (!all_done() && std::chrono::steady_clock::now() < deadline) {
      ++calls;
      advance(0, [&] { return pair.client.send_all(to_server, &error); });
      advance(1, [&] { return pair.server.send_all(to_client, &error); });
      advance(2, [&] { return pair.server.receive_all(at_server, &error); });
      advance(3, [&] { return pair.client.receive_all(at_client, &error); });
      for (Progress step : steps) {
        if (step == Progress::Failed) FAIL(error);  // not REQUIRE: no assertion per call
      }
    }
    INFO("round " << round << " after " << calls << " rounds of calls");
    REQUIRE(all_done());
    CHECK(calls > 8);  // the messages did go in pieces
    CHECK(at_server == to_server);
    CHECK(at_client == to_client);
    std::fill(at_server.begin(), at_server.end(), 0);
    std::fill(at_client.begin(), at_client.end(), 0);
  }
  CHECK_FALSE(pair.client.peer_closed());
  CHECK_FALSE(pair.server.peer_closed());
}

TEST_CASE("a send into a full socket is Pending, not blocked", "[unit][tcp_channel]") {
  Pair pair = connected_pair();
  std::vector<uint8_t> big(64 << 20, 7);
  std::string error;
  // Nobody reads: the socket buffers fill long before 64 MiB.
  Progress first = pair.client.send_all(big, &error);
  REQUIRE(first == Progress::Pending);
  CHECK(pair.client.send_all(big, &error) == Progress::Pending);
  // A different span in the middle of a message is a caller bug, refused.
  std::vector<uint8_t> other(10);
  REQUIRE(pair.client.send_all(other, &error) == Progress::Failed);
  CHECK(error.find("called with 10 bytes while a 67108864-byte message is ") != std::string::npos);
}

TEST_CASE("a closed peer is reported by name", "[unit][tcp_channel]") {
  Pair pair = connected_pair();
  std::string error;
  CHECK_FALSE(pair.client.peer_closed());
  uint8_t half[4] = {1, 2, 3, 4};
  REQUIRE(drive([&] { return pair.server.send_all(half, &error); }) == Progress::Done);
  std::string peer = pair.listener->address().text();
  pair.server = TcpStream();  // closes the accepted socket

  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  // Queued data comes first; the close shows once it is read.
  uint8_t buffer[8];
  REQUIRE(drive([&] { return pair.client.receive_all(buffer, &error); }) == Progress::Failed);
  CHECK(error == "peer " + peer + " closed the connection after 4 of 8 bytes received");
  while (!pair.client.peer_closed() && std::chrono::steady_clock::now() < deadline) {
  }
  CHECK(pair.client.peer_closed());

  // Sending to the closed peer fails too, without SIGPIPE killing the test.
  std::vector<uint8_t> data(1 << 20, 1);
  Progress sent = drive([&] { return pair.client.send_all(data, &error); });
  if (sent != Progress::Failed) sent = drive([&] { return pair.client.send_all(data, &error); });
  REQUIRE(sent == Progress::Failed);
  CHECK(error.find("peer " + peer + " closed the connection") == 0);
}

TEST_CASE("connecting to a closed port fails with the address named", "[unit][tcp_channel]") {
  std::string error;
  SocketAddress closed;
  {
    auto listener = TcpListener::open(ipv4("127.0.0.1", 0), &error);
    REQUIRE(listener != nullptr);
    closed = listener->address();
  }
  TcpStream stream;
  Progress result = Progress::Failed;
  if (TcpStream::connect(closed, &stream, &error)) {
    result = drive([&] { return stream.finish_connect(&error); });
  }
  CHECK(result == Progress::Failed);
  CHECK(error.find("connection refused by " + closed.text()) == 0);
  CHECK(stream.peer_closed());
}

// A port that was just listened on and is closed now.
SocketAddress closed_port() {
  std::string error;
  auto listener = TcpListener::open(ipv4("127.0.0.1", 0), &error);
  REQUIRE(listener != nullptr);
  return listener->address();
}

TEST_CASE("a refused connect is tried again within its grace and goes through",
          "[unit][tcp_channel]") {
  std::string error;
  const SocketAddress address = closed_port();
  TcpStream stream;
  REQUIRE(TcpStream::connect(address, &stream, &error, std::chrono::seconds(30)));
  // Refused, and refused again: still Pending.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  Progress progress = Progress::Pending;
  while (progress == Progress::Pending && stream.refusals() < 3 &&
         std::chrono::steady_clock::now() < deadline) {
    progress = stream.finish_connect(&error);
  }
  REQUIRE(progress == Progress::Pending);
  REQUIRE(stream.refusals() >= 3);
  // The listener comes (back): the next attempt reaches it.
  auto listener = TcpListener::open(address, &error);
  REQUIRE(listener != nullptr);
  REQUIRE(drive([&] { return stream.finish_connect(&error); }) == Progress::Done);
  TcpStream accepted;
  const auto accept_deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!accepted.valid() && std::chrono::steady_clock::now() < accept_deadline) {
    REQUIRE(listener->accept(&accepted, &error));
  }
  REQUIRE(accepted.valid());
  const uint8_t sent[4] = {0xde, 0xad, 0xbe, 0xef};
  uint8_t received[4] = {};
  REQUIRE(drive([&] { return stream.send_all(sent, &error); }) == Progress::Done);
  REQUIRE(drive([&] { return accepted.receive_all(received, &error); }) == Progress::Done);
  CHECK(std::memcmp(sent, received, sizeof sent) == 0);
}

TEST_CASE("a connect refused for all of its grace fails with the refusals counted",
          "[unit][tcp_channel]") {
  std::string error;
  const SocketAddress address = closed_port();
  TcpStream stream;
  Progress result = Progress::Failed;
  if (TcpStream::connect(address, &stream, &error, std::chrono::milliseconds(50))) {
    result = drive([&] { return stream.finish_connect(&error); });
  }
  CHECK(result == Progress::Failed);
  CHECK(error.find("connection refused by " + address.text()) == 0);
  CHECK(error.find(" refusals in ") != std::string::npos);
  CHECK(stream.refusals() >= 2);
}

TEST_CASE("a listener on a taken port says so", "[unit][tcp_channel]") {
  std::string error;
  auto first = TcpListener::open(ipv4("127.0.0.1", 0), &error);
  REQUIRE(first != nullptr);
  auto second = TcpListener::open(first->address(), &error);
  CHECK(second == nullptr);
  CHECK(error.find("listen on " + first->address().text() + ": bind: ") == 0);
}
