// Liveness links between processes (core/peer_links.h), two PeerLinks in
// one process standing for two processes: the wire pieces refuse what is
// malformed, a link comes up from either side and is shared, and closing
// one side (what the kernel does when a process dies), a refused connect
// and a stray connection each end the way a comm needs.
#include "core/peer_links.h"

#include <arpa/inet.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstring>
#include <thread>

using namespace weft;
using Health = PeerLink::Health;

namespace {

SocketAddress loopback(uint16_t port = 0) {
  in_addr address{};
  REQUIRE(inet_pton(AF_INET, "127.0.0.1", &address) == 1);
  return SocketAddress::from_ipv4(address, port);
}

std::shared_ptr<PeerLinks> open_links() {
  std::string error;
  auto links = PeerLinks::open(loopback(), 5000, &error);
  REQUIRE(links != nullptr);
  REQUIRE(error.empty());
  return links;
}

// Checks the link (and lets `other` accept) until it reports `want`.
Health wait_for(PeerLink& link, PeerLinks& other, Health want, std::string* reason) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  Health health = Health::kUnknown;
  while (std::chrono::steady_clock::now() < deadline) {
    other.accept_waiting();
    health = link.check(reason);
    if (health == want) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return health;
}

}  // namespace

TEST_CASE("peer identities and link hellos round-trip and refuse garbage", "[unit][peer_links]") {
  PeerIdentity identity;
  identity.token = 0x0123456789abcdefull;
  identity.address = loopback(4567);
  uint8_t bytes[PeerIdentity::kPackedSize];
  identity.pack(bytes);
  PeerIdentity decoded;
  std::string error;
  REQUIRE(PeerIdentity::unpack(bytes, sizeof(bytes), &decoded, &error));
  CHECK(decoded.token == identity.token);
  CHECK(decoded.address.text() == "127.0.0.1:4567");
  CHECK_FALSE(PeerIdentity::unpack(bytes, sizeof(bytes) - 1, &decoded, &error));
  CHECK_THAT(error, Catch::Contains("31 bytes"));
  bytes[8] = 5;  // address family 5
  CHECK_FALSE(PeerIdentity::unpack(bytes, sizeof(bytes), &decoded, &error));
  CHECK_THAT(error, Catch::Contains("peer identity"));
  // No token: no link, and the rest is not read.
  PeerIdentity none;
  none.pack(bytes);
  REQUIRE(PeerIdentity::unpack(bytes, sizeof(bytes), &decoded, &error));
  CHECK(decoded.token == 0);

  uint8_t hello[kLinkHelloSize];
  encode_link_hello(42, hello);
  uint64_t token = 0;
  REQUIRE(decode_link_hello(hello, &token, &error));
  CHECK(token == 42);
  hello[0] ^= 1;
  CHECK_FALSE(decode_link_hello(hello, &token, &error));
  CHECK_THAT(error, Catch::Contains("bad magic"));
  encode_link_hello(42, hello);
  hello[6] = 1;
  CHECK_FALSE(decode_link_hello(hello, &token, &error));
  CHECK_THAT(error, Catch::Contains("reserved"));
  encode_link_hello(0, hello);
  CHECK_FALSE(decode_link_hello(hello, &token, &error));
  CHECK_THAT(error, Catch::Contains("token 0"));
}

TEST_CASE("a link comes up, is shared both ways, and goes when its process does",
          "[unit][peer_links]") {
  auto a = open_links();
  auto b = open_links();
  REQUIRE(a->identity().token != b->identity().token);
  CHECK(a->link_to(a->identity(), "self") == nullptr);
  CHECK(a->link_to(PeerIdentity{}, "nobody") == nullptr);

  std::shared_ptr<PeerLink> a_to_b = a->link_to(b->identity(), "b");
  REQUIRE(a_to_b != nullptr);
  CHECK(a->link_to(b->identity(), "b again") == a_to_b);
  std::string reason;
  REQUIRE(wait_for(*a_to_b, *b, Health::kAlive, &reason) == Health::kAlive);
  // b finds the link a opened (its hello named a) instead of opening one.
  b->accept_waiting();
  std::shared_ptr<PeerLink> b_to_a = b->link_to(a->identity(), "a");
  REQUIRE(b_to_a != nullptr);
  CHECK(b_to_a->check(&reason) == Health::kAlive);

  // What the kernel does when b's process dies: every socket of it closes.
  b_to_a.reset();
  b.reset();
  REQUIRE(wait_for(*a_to_b, *a, Health::kGone, &reason) == Health::kGone);
  CHECK_THAT(reason, Catch::Contains("its process exited or finalized weft"));
  // Gone stays gone.
  CHECK(a_to_b->check(&reason) == Health::kGone);
}

TEST_CASE("a refused link gives no verdict: a firewall's reset looks the same",
          "[unit][peer_links]") {
  auto a = open_links();
  PeerIdentity dead;
  {
    auto b = open_links();
    dead = b->identity();
  }  // its listener is closed: the connect is refused
  std::shared_ptr<PeerLink> link = a->link_to(dead, "refused");
  REQUIRE(link != nullptr);
  std::string reason;
  // Give the refusal time to arrive: the link stays without a verdict.
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(300);
  while (std::chrono::steady_clock::now() < until) {
    CHECK(link->check(&reason) == Health::kUnknown);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  PeerWatch watch;
  watch.watch(a, link);
  CHECK(watch.check_now("dev", "peer") == ncclSuccess);
}

TEST_CASE("stray connections to the listener do not block a genuine link", "[unit][peer_links]") {
  auto a = open_links();
  auto b = open_links();
  // A port scanner that sends garbage, and one that sends nothing.
  TcpStream garbage;
  TcpStream silent;
  std::string error;
  REQUIRE(TcpStream::connect(a->identity().address, &garbage, &error));
  REQUIRE(TcpStream::connect(a->identity().address, &silent, &error));
  uint8_t junk[kLinkHelloSize];
  std::memset(junk, 0x5a, sizeof(junk));
  for (int i = 0; i < 1000 && garbage.send_all(std::span<const uint8_t>(junk), &error) ==
                                  TcpStream::Progress::Pending;
       ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  std::shared_ptr<PeerLink> b_to_a = b->link_to(a->identity(), "a");
  std::string reason;
  REQUIRE(wait_for(*b_to_a, *a, Health::kAlive, &reason) == Health::kAlive);
  a->accept_waiting();
  std::shared_ptr<PeerLink> a_to_b = a->link_to(b->identity(), "b");
  CHECK(a_to_b->check(&reason) == Health::kAlive);
  // The garbage connection was dropped: its peer sees the close.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!garbage.peer_closed() && std::chrono::steady_clock::now() < deadline) {
    a->accept_waiting();
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  CHECK(garbage.peer_closed());
}

TEST_CASE("a comm fails only once its peer has been gone for a second", "[unit][peer_links]") {
  auto a = open_links();
  auto b = open_links();
  PeerWatch watch;
  // Nothing to watch: never fails.
  CHECK(watch.check_now("dev", "peer") == ncclSuccess);
  std::shared_ptr<PeerLink> link = a->link_to(b->identity(), "b");
  std::string reason;
  REQUIRE(wait_for(*link, *b, Health::kAlive, &reason) == Health::kAlive);
  watch.watch(a, link);
  CHECK(watch.check_now("dev", "peer") == ncclSuccess);
  b.reset();
  REQUIRE(wait_for(*link, *a, Health::kGone, &reason) == Health::kGone);
  const auto gone = std::chrono::steady_clock::now();
  ncclResult_t result = ncclSuccess;
  while (result == ncclSuccess &&
         std::chrono::steady_clock::now() - gone < std::chrono::seconds(5)) {
    result = watch.check_now("dev", "peer");
    if (result == ncclSuccess) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  CHECK(result == ncclRemoteError);
  CHECK(std::chrono::steady_clock::now() - gone >= std::chrono::milliseconds(900));
  // Every later call says the same.
  CHECK(watch.check("dev", "peer") == ncclRemoteError);
}
