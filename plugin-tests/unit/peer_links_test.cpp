// Liveness links between processes (core/peer_links.h), two PeerLinks in
// one process standing for two processes: the wire pieces refuse what is
// malformed, a link comes up from either side and is shared, and closing
// one side (what the kernel does when a process dies), a refused connect
// and a stray connection each end the way a comm needs.
#include "core/peer_links.h"

#include <arpa/inet.h>
#include <sys/socket.h>

#include <atomic>
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
  encode_link_hello(LinkHello{42, 0x5eed}, hello);
  LinkHello read;
  REQUIRE(decode_link_hello(hello, &read, &error));
  CHECK(read.token == 42);
  CHECK(read.proof == 0x5eed);
  hello[0] ^= 1;
  CHECK_FALSE(decode_link_hello(hello, &read, &error));
  CHECK_THAT(error, Catch::Contains("bad magic"));
  encode_link_hello(LinkHello{42, 0x5eed}, hello);
  hello[4] = 2;  // a weft before link proofs
  CHECK_FALSE(decode_link_hello(hello, &read, &error));
  CHECK(error == "link hello of version 2, this weft speaks 3 (mixed weft versions across nodes?)");
  encode_link_hello(LinkHello{42, 0x5eed}, hello);
  hello[6] = 1;
  CHECK_FALSE(decode_link_hello(hello, &read, &error));
  CHECK_THAT(error, Catch::Contains("reserved"));
  encode_link_hello(LinkHello{0, 0x5eed}, hello);
  CHECK_FALSE(decode_link_hello(hello, &read, &error));
  CHECK_THAT(error, Catch::Contains("token 0"));
  encode_link_hello(LinkHello{42, 0}, hello);
  CHECK_FALSE(decode_link_hello(hello, &read, &error));
  CHECK_THAT(error, Catch::Contains("proof 0"));
}

TEST_CASE("a link comes up, is shared both ways, and goes when its process does",
          "[unit][peer_links]") {
  auto a = open_links();
  auto b = open_links();
  REQUIRE(a->identity().token != b->identity().token);
  CHECK(a->link_to(a->identity(), a->link_key(), "self") == nullptr);
  CHECK(a->link_to(PeerIdentity{}, 1, "nobody") == nullptr);

  std::shared_ptr<PeerLink> a_to_b = a->link_to(b->identity(), b->link_key(), "b");
  REQUIRE(a_to_b != nullptr);
  CHECK(a->link_to(b->identity(), b->link_key(), "b again") == a_to_b);
  std::string reason;
  REQUIRE(wait_for(*a_to_b, *b, Health::kAlive, &reason) == Health::kAlive);
  // b finds the link a opened (its hello named a) instead of opening one.
  b->accept_waiting();
  std::shared_ptr<PeerLink> b_to_a = b->link_to(a->identity(), a->link_key(), "a");
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
  uint64_t dead_key = 0;
  {
    auto b = open_links();
    dead = b->identity();
    dead_key = b->link_key();
  }  // its listener is closed: the connect is refused
  std::shared_ptr<PeerLink> link = a->link_to(dead, dead_key, "refused");
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
  std::shared_ptr<PeerLink> b_to_a = b->link_to(a->identity(), a->link_key(), "a");
  std::string reason;
  REQUIRE(wait_for(*b_to_a, *a, Health::kAlive, &reason) == Health::kAlive);
  a->accept_waiting();
  std::shared_ptr<PeerLink> a_to_b = a->link_to(b->identity(), b->link_key(), "b");
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
  std::shared_ptr<PeerLink> link = a->link_to(b->identity(), b->link_key(), "b");
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

// Messages between mailboxes over links (core/link_messages.h).
namespace {

// Pumps `links` until mailbox `id` has a message.
bool wait_message(PeerLinks& links, uint32_t id, LinkMessage* out, PeerLinks* other = nullptr) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (std::chrono::steady_clock::now() < deadline) {
    links.pump();
    if (other != nullptr) other->pump();
    if (links.take_message(id, out)) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return false;
}

std::span<const uint8_t> bytes_of(const std::string& text) {
  return {reinterpret_cast<const uint8_t*>(text.data()), text.size()};
}

std::string text_of(const LinkMessage& message) {
  return std::string(message.payload.begin(), message.payload.end());
}

}  // namespace

TEST_CASE("link message headers round-trip and refuse garbage", "[unit][peer_links]") {
  LinkFrameHeader header;
  header.kind = 7;
  header.length = 160;
  header.to = 0x01020304;
  header.from = 9;
  uint8_t bytes[kLinkFrameHeaderSize];
  encode_link_frame_header(header, bytes);
  LinkFrameHeader decoded;
  std::string error;
  REQUIRE(decode_link_frame_header(bytes, &decoded, &error));
  CHECK(decoded.kind == 7);
  CHECK(decoded.length == 160);
  CHECK(decoded.to == 0x01020304);
  CHECK(decoded.from == 9);
  CHECK(bytes[4] == 0x04);  // little-endian
  bytes[1] = 1;
  CHECK_FALSE(decode_link_frame_header(bytes, &decoded, &error));
  CHECK_THAT(error, Catch::Contains("reserved byte 1"));
  header.length = kMaxLinkPayload + 1;
  encode_link_frame_header(header, bytes);
  CHECK_FALSE(decode_link_frame_header(bytes, &decoded, &error));
  CHECK_THAT(error, Catch::Contains("513 bytes (at most 512)"));
  header.length = 0;
  header.to = 0;
  encode_link_frame_header(header, bytes);
  CHECK_FALSE(decode_link_frame_header(bytes, &decoded, &error));
  CHECK_THAT(error, Catch::Contains("mailbox 0"));
}

TEST_CASE("messages reach their mailboxes both ways, and a closed one answers",
          "[unit][peer_links]") {
  auto a = open_links();
  auto b = open_links();
  const uint32_t a_box = a->open_mailbox();
  const uint32_t b_box = b->open_mailbox();
  std::shared_ptr<PeerLink> a_to_b = a->link_to(b->identity(), b->link_key(), "b");
  REQUIRE(a_to_b != nullptr);
  std::string why;
  // Queued while the link connects, sent after its hello.
  REQUIRE(a_to_b->send(7, b_box, a_box, bytes_of("request"), &why));
  LinkMessage got;
  REQUIRE(wait_message(*b, b_box, &got, a.get()));
  CHECK(got.kind == 7);
  CHECK(got.from == a_box);
  CHECK(text_of(got) == "request");
  // The answer goes back on the link it came on.
  std::shared_ptr<PeerLink> back = got.link.lock();
  REQUIRE(back != nullptr);
  REQUIRE(back->send(8, got.from, b_box, bytes_of("answer"), &why));
  REQUIRE(wait_message(*a, a_box, &got, b.get()));
  CHECK(got.kind == 8);
  CHECK(text_of(got) == "answer");
  // An empty message.
  REQUIRE(a_to_b->send(9, b_box, 0, {}, &why));
  REQUIRE(wait_message(*b, b_box, &got, a.get()));
  CHECK(got.payload.empty());
  CHECK(got.from == 0);

  // To a mailbox that is not open: weft answers kNoMailbox, naming it.
  REQUIRE(a_to_b->send(7, b_box + 100, a_box, bytes_of("lost"), &why));
  REQUIRE(wait_message(*a, a_box, &got, b.get()));
  CHECK(got.kind == kNoMailbox);
  REQUIRE(got.payload.size() == 4);
  CHECK(got.payload[0] == static_cast<uint8_t>(b_box + 100));
  // One that closes with a message unread answers it the same way.
  REQUIRE(a_to_b->send(7, b_box, a_box, bytes_of("unread"), &why));
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  LinkMessage none;
  while (a_to_b->busy() && std::chrono::steady_clock::now() < deadline) a->pump();
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  b->pump();
  b->close_mailbox(b_box);
  REQUIRE(wait_message(*a, a_box, &got, b.get()));
  CHECK(got.kind == kNoMailbox);
  CHECK(got.payload[0] == static_cast<uint8_t>(b_box));
  CHECK_FALSE(a->take_message(a_box, &none));
  // Too large to be a message.
  std::vector<uint8_t> big(kMaxLinkPayload + 1);
  CHECK_FALSE(a_to_b->send(7, b_box, a_box, big, &why));
  CHECK_THAT(why, Catch::Contains("513 bytes"));
}

TEST_CASE("a mailbox gives its messages in order while they arrive, and the unread at close",
          "[unit][peer_links]") {
  Mailboxes boxes;
  const uint32_t id = boxes.open();
  const uint32_t other = boxes.open();
  auto message = [](uint32_t n) {
    LinkMessage m;
    m.from = n;
    return m;
  };
  uint32_t delivered = 0;
  uint32_t taken = 0;
  LinkMessage got;
  // Taken while more arrive: the box drops what it took once that is half
  // of it (past 64), and must keep the order across each drop.
  for (int round = 0; round < 50; ++round) {
    for (int i = 0; i < 30; ++i) REQUIRE(boxes.deliver(id, message(delivered++)));
    for (int i = 0; i < 20; ++i) {
      REQUIRE(boxes.take(id, &got));
      REQUIRE(got.from == taken++);
    }
  }
  REQUIRE(boxes.deliver(other, message(9999)));
  while (taken < 1400) {
    REQUIRE(boxes.take(id, &got));
    REQUIRE(got.from == taken++);
  }
  std::vector<LinkMessage> unread = boxes.close(id);
  REQUIRE(unread.size() == delivered - taken);
  for (const LinkMessage& m : unread) REQUIRE(m.from == taken++);
  CHECK_FALSE(boxes.take(id, &got));
  CHECK_FALSE(boxes.deliver(id, message(0)));
  // The other box kept its own.
  REQUIRE(boxes.take(other, &got));
  CHECK(got.from == 9999);
  CHECK_FALSE(boxes.take(other, &got));
}

TEST_CASE("a burst larger than the socket takes arrives whole and in order", "[unit][peer_links]") {
  auto a = open_links();
  auto b = open_links();
  const uint32_t b_box = b->open_mailbox();
  std::shared_ptr<PeerLink> a_to_b = a->link_to(b->identity(), b->link_key(), "b");
  constexpr int kCount = 20000;  // 3.4 MB: more than a loopback socket buffers
  std::string why;
  for (int i = 0; i < kCount; ++i) {
    std::string payload(160, static_cast<char>('a' + i % 26));
    std::memcpy(payload.data(), &i, sizeof(i));
    REQUIRE(a_to_b->send(3, b_box, 0, bytes_of(payload), &why));
  }
  int next = 0;
  LinkMessage got;
  while (next < kCount && wait_message(*b, b_box, &got, a.get())) {
    REQUIRE(got.payload.size() == 160);
    int index = -1;
    std::memcpy(&index, got.payload.data(), sizeof(index));
    REQUIRE(index == next);
    REQUIRE(got.payload[159] == static_cast<uint8_t>('a' + index % 26));
    ++next;
  }
  CHECK(next == kCount);
}

TEST_CASE("a link that carries garbage counts as gone, naming why", "[unit][peer_links]") {
  auto b = open_links();
  // A process that says hello as weft, then sends what is not a message.
  TcpStream rogue;
  std::string error;
  REQUIRE(TcpStream::connect(b->identity().address, &rogue, &error));
  uint8_t bytes[kLinkHelloSize + kLinkFrameHeaderSize];
  encode_link_hello(LinkHello{77, b->link_key()}, bytes);
  LinkFrameHeader header;
  header.to = 1;
  encode_link_frame_header(header, bytes + kLinkHelloSize);
  bytes[kLinkHelloSize + 1] = 0xee;  // reserved
  TcpStream::Progress sent = TcpStream::Progress::Pending;
  for (int i = 0; i < 1000 && sent == TcpStream::Progress::Pending; ++i) {
    sent = rogue.send_all(std::span<const uint8_t>(bytes), &error);
    if (sent == TcpStream::Progress::Pending)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  REQUIRE(sent == TcpStream::Progress::Done);
  PeerIdentity rogue_identity;
  rogue_identity.token = 77;
  rogue_identity.address = loopback(1);
  std::shared_ptr<PeerLink> link;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  std::string reason;
  Health health = Health::kUnknown;
  while (health != Health::kGone && std::chrono::steady_clock::now() < deadline) {
    b->pump();
    if (!link) link = b->link_to(rogue_identity, 1, "rogue");
    health = link->check(&reason);
  }
  REQUIRE(health == Health::kGone);
  CHECK_THAT(reason, Catch::Contains("carried what is not a weft message: link message with "
                                     "reserved byte 238"));
  CHECK_FALSE(link->send(7, 1, 0, {}, &error));
  CHECK_THAT(error, Catch::Contains("the peer is gone"));
}

TEST_CASE("a link that cannot be opened refuses messages, saying why", "[unit][peer_links]") {
  auto a = open_links();
  PeerIdentity dead;
  uint64_t dead_key = 0;
  {
    auto b = open_links();
    dead = b->identity();
    dead_key = b->link_key();
  }
  std::shared_ptr<PeerLink> link = a->link_to(dead, dead_key, "refused");
  std::string why;
  // On loopback the refusal may be known already when link_to returns.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (link->usable(&why) && std::chrono::steady_clock::now() < deadline) {
    a->pump();
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  CHECK_FALSE(link->usable(&why));
  CHECK_THAT(why, Catch::Contains("no link to refused") && Catch::Contains("refused"));
  CHECK_FALSE(link->send(7, 1, 0, {}, &why));
}

TEST_CASE("threads send, pump and answer on shared links at once", "[unit][peer_links]") {
  // As NCCL's threads may: two connect from one process while another
  // thread of the other process answers, every call from its own thread.
  auto a = open_links();
  auto b = open_links();
  const uint32_t b_box = b->open_mailbox();
  constexpr int kPerThread = 500;
  std::atomic<bool> stop{false};
  std::thread answerer([&] {
    LinkMessage message;
    while (!stop.load()) {
      b->pump();
      while (b->take_message(b_box, &message)) {
        std::shared_ptr<PeerLink> back = message.link.lock();
        std::string why;
        if (back) back->send(2, message.from, 0, message.payload, &why);
      }
      std::this_thread::yield();
    }
  });
  auto client = [&](int id, int* answered) {
    const uint32_t box = a->open_mailbox();
    std::shared_ptr<PeerLink> link = a->link_to(b->identity(), b->link_key(), "b");
    for (int i = 0; i < kPerThread; ++i) {
      uint8_t payload[8];
      std::memcpy(payload, &id, 4);
      std::memcpy(payload + 4, &i, 4);
      std::string why;
      if (!link->send(1, b_box, box, payload, &why,
                      i % 2 ? PeerLink::Flush::kPump : PeerLink::Flush::kNow)) {
        return;
      }
      LinkMessage answer;
      if (!wait_message(*a, box, &answer)) return;
      if (answer.kind != 2 || answer.payload.size() != 8 ||
          std::memcmp(answer.payload.data(), payload, 8) != 0) {
        return;
      }
      ++*answered;
    }
    a->close_mailbox(box);
  };
  int answered[2] = {0, 0};
  std::thread first(client, 1, &answered[0]);
  std::thread second(client, 2, &answered[1]);
  first.join();
  second.join();
  stop.store(true);
  answerer.join();
  CHECK(answered[0] == kPerThread);
  CHECK(answered[1] == kPerThread);
}

namespace {

// A raw connection to `links`' listener that sends `bytes`: a hello and a
// frame, as another program would.
TcpStream raw_link(PeerLinks& links, std::span<const uint8_t> bytes) {
  TcpStream stream;
  std::string error;
  REQUIRE(TcpStream::connect(links.identity().address, &stream, &error));
  TcpStream::Progress sent = TcpStream::Progress::Pending;
  for (int i = 0; i < 1000 && sent == TcpStream::Progress::Pending; ++i) {
    sent = stream.send_all(bytes, &error);
    if (sent == TcpStream::Progress::Pending)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  REQUIRE(sent == TcpStream::Progress::Done);
  return stream;
}

// A hello with `hello` and one message "forged" to mailbox `to`.
std::vector<uint8_t> hello_and_message(const LinkHello& hello, uint32_t to) {
  const std::string payload = "forged";
  std::vector<uint8_t> bytes(kLinkHelloSize + kLinkFrameHeaderSize + payload.size());
  encode_link_hello(hello, bytes.data());
  LinkFrameHeader header;
  header.kind = 1;
  header.length = static_cast<uint16_t>(payload.size());
  header.to = to;
  header.from = 9;
  encode_link_frame_header(header, bytes.data() + kLinkHelloSize);
  std::memcpy(bytes.data() + kLinkHelloSize + kLinkFrameHeaderSize, payload.data(), payload.size());
  return bytes;
}

// Pumps `links` until the listener has answered `stream` with a refusal
// (kLinkRefused, nothing else; `answered` false: nothing at all, for what
// is not a hello of this version) and closed it.
bool refused(PeerLinks& links, TcpStream& stream, bool answered = true) {
  std::vector<uint8_t> got;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (std::chrono::steady_clock::now() < deadline) {
    links.pump();
    uint8_t buffer[64];
    ssize_t n = ::recv(stream.fd(), buffer, sizeof(buffer), MSG_DONTWAIT);
    if (n > 0) {
      got.insert(got.end(), buffer, buffer + n);
      continue;
    }
    if (n == 0) break;  // closed
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  if (!answered) return got.empty() && stream.peer_closed();
  LinkFrameHeader header;
  std::string error;
  return got.size() == kLinkFrameHeaderSize &&
         decode_link_frame_header(got.data(), &header, &error) && header.kind == kLinkRefused &&
         header.length == 0 && stream.peer_closed();
}

}  // namespace

TEST_CASE("a hello that proves no secret is dropped: no link, no message delivered",
          "[unit][peer_links]") {
  auto a = open_links();  // the genuine peer, whose token is stolen
  auto b = open_links();  // the victim
  auto other = open_links();
  const uint32_t box = b->open_mailbox();
  const uint64_t stolen = a->identity().token;
  struct Attempt {
    const char* what;
    std::vector<uint8_t> bytes;
    bool answered = true;
  };
  std::vector<Attempt> attempts = {
      {"a stolen token, a guessed proof", hello_and_message({stolen, 0x1234567890abcdefull}, box)},
      {"a stolen token, the genuine peer's own key",
       hello_and_message({stolen, a->link_key()}, box)},
      {"a guessed token, another process's key", hello_and_message({777, other->link_key()}, box)},
  };
  // A weft before link proofs (version 2: 16 bytes, no proof), stolen token.
  std::vector<uint8_t> old = hello_and_message({stolen, 1}, box);
  old[4] = 2;
  attempts.push_back({"a version 2 hello", old, false});
  for (Attempt& attempt : attempts) {
    INFO(attempt.what);
    TcpStream impostor = raw_link(*b, attempt.bytes);
    CHECK(refused(*b, impostor, attempt.answered));
    LinkMessage message;
    CHECK_FALSE(b->take_message(box, &message));
  }
  // The genuine peer then links up, and its message is the one delivered.
  std::shared_ptr<PeerLink> a_to_b = a->link_to(b->identity(), b->link_key(), "b");
  std::string reason;
  REQUIRE(wait_for(*a_to_b, *b, Health::kAlive, &reason) == Health::kAlive);
  std::string why;
  REQUIRE(a_to_b->send(1, box, 0, bytes_of("genuine"), &why));
  LinkMessage message;
  REQUIRE(wait_message(*b, box, &message));
  CHECK(text_of(message) == "genuine");
  // The link b files under the stolen token is the genuine one.
  std::shared_ptr<PeerLink> b_to_a = b->link_to(a->identity(), a->link_key(), "a");
  CHECK(b_to_a->check(&reason) == Health::kAlive);
  CHECK(b_to_a == message.link.lock());
}

TEST_CASE("an admitted listen secret proves a hello until it is revoked", "[unit][peer_links]") {
  auto b = open_links();
  const uint32_t box = b->open_mailbox();
  const uint64_t secret = 0x0ddba11cafef00dull;
  b->admit(secret);
  TcpStream first = raw_link(*b, hello_and_message({4242, secret}, box));
  LinkMessage message;
  REQUIRE(wait_message(*b, box, &message));
  CHECK(text_of(message) == "forged");
  b->revoke(secret);
  TcpStream second = raw_link(*b, hello_and_message({4343, secret}, box));
  CHECK(refused(*b, second));
  CHECK_FALSE(b->take_message(box, &message));
}

TEST_CASE("silent connections beyond the limit make room: a genuine hello still gets in",
          "[unit][peer_links]") {
  auto a = open_links();
  auto b = open_links();
  std::vector<TcpStream> silent(100);
  std::string error;
  for (TcpStream& stream : silent) {
    REQUIRE(TcpStream::connect(b->identity().address, &stream, &error));
    b->accept_waiting();
  }
  std::shared_ptr<PeerLink> a_to_b = a->link_to(b->identity(), b->link_key(), "b");
  std::string reason;
  REQUIRE(wait_for(*a_to_b, *b, Health::kAlive, &reason) == Health::kAlive);
  std::shared_ptr<PeerLink> b_to_a = b->link_to(a->identity(), a->link_key(), "a");
  CHECK(b_to_a->check(&reason) == Health::kAlive);
}

TEST_CASE("a refused hello is no verdict on the peer, and the right proof opens the link later",
          "[unit][peer_links]") {
  auto a = open_links();
  auto b = open_links();
  // A stale handle's secret, which b no longer admits.
  std::shared_ptr<PeerLink> link = a->link_to(b->identity(), 0x57a1e, "b");
  REQUIRE(link != nullptr);
  std::string why;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (link->usable(&why) && std::chrono::steady_clock::now() < deadline) {
    b->pump();
    a->pump();
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  REQUIRE_FALSE(link->usable(&why));
  CHECK_THAT(why, Catch::Contains("refused the link's hello") && Catch::Contains("stale handle"));
  std::string reason;
  CHECK(link->check(&reason) == Health::kUnknown);  // not gone: comms do not fail for it
  // A genuine connect later hands a the key: the same link opens.
  CHECK(a->link_to(b->identity(), b->link_key(), "b") == link);
  REQUIRE(wait_for(*link, *b, Health::kAlive, &reason) == Health::kAlive);
}
