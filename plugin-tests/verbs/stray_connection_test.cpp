// The verbs transport's side channel is a TCP port anyone can reach: a port
// scanner, a rank that died mid-connect, a stale handle from an earlier
// job. Connections that stall there, or send garbage, must not hold up the
// genuine connector behind them: the listener still accepts it, and its
// bytes arrive intact.
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "core/fd.h"
#include "core/handle_header.h"
#include "core/socket_address.h"
#include "net_ops.h"
#include "pattern.h"
#include "two_rank.h"

using namespace weft;
using namespace weft::ft;

namespace {

// A blocking TCP connection to the side channel named in `handle`.
Fd connect_raw(const Handle& handle) {
  ListenHandle decoded;
  std::string error;
  FT_REQUIRE(decode_handle(handle.bytes, sizeof handle.bytes, TransportId::Verbs, &decoded, &error),
             "the listen handle does not decode as a verbs handle: " << error);
  SocketAddress address;
  FT_REQUIRE(SocketAddress::unpack(decoded.payload, decoded.payload_size, &address, &error),
             "side-channel address in the handle: " << error);
  Fd fd(::socket(address.family(), SOCK_STREAM | SOCK_CLOEXEC, 0));
  FT_REQUIRE(fd.valid(), "socket: " << std::strerror(errno));
  FT_REQUIRE(
      ::connect(fd.get(), reinterpret_cast<const sockaddr*>(&address.storage), address.length) == 0,
      "connecting to " << address.text() << ": " << std::strerror(errno));
  return fd;
}

void stray_then_genuine(int v) {
  auto c = open_plugin(v);
  const int dev = test_device(*c);
  Handle handle;
  void* lc = do_listen(*c, dev, handle);

  // Silent ones first (they reach the listener before the genuine one),
  // then one that sends a partial connection message, then garbage.
  std::vector<Fd> strays;
  for (int i = 0; i < 3; ++i) strays.push_back(connect_raw(handle));
  strays.push_back(connect_raw(handle));
  const char partial[] = "WVC1 and then nothing";
  FT_REQUIRE(::send(strays.back().get(), partial, 10, MSG_NOSIGNAL) == 10, "send partial");
  strays.push_back(connect_raw(handle));
  std::vector<char> garbage(128, '\x5a');
  FT_REQUIRE(::send(strays.back().get(), garbage.data(), garbage.size(), MSG_NOSIGNAL) == 128,
             "send garbage");
  void* rc = nullptr;
  for (int i = 0; i < 100; ++i) {
    FT_OK(c->accept(lc, &rc));
    FT_REQUIRE(rc == nullptr, "the listener accepted a connection that never sent its info");
  }

  void* sc = nullptr;
  while (!sc || !rc) {
    if (!sc) FT_OK(c->connect(dev, handle.bytes, &sc));
    if (!rc) FT_OK(c->accept(lc, &rc));
    FT_DEADLINE("connecting with the genuine handle while stray connections stall the listener");
  }
  FT_OK(c->close_listen(lc));

  const size_t n = 1u << 20;
  Buffer sbuf(n), rbuf(n);
  fill_pattern(sbuf.data(), n, pattern_seed(41, v));
  {
    Mr ms(*c, sc, sbuf.data(), n), mr(*c, rc, rbuf.data(), n);
    void* rreq = post_irecv1(*c, rc, rbuf.data(), n, 7, mr.get());
    void* sreq = post_isend(*c, sc, sbuf.data(), n, 7, ms.get());
    wait_ok(*c, sreq, "send after stray connections");
    int got = wait_ok(*c, rreq, "receive after stray connections");
    FT_REQUIRE(got == static_cast<int>(n), "size " << got);
    check_received(rbuf.data(), n, n, pattern_seed(41, v), "receive after stray connections");
  }
  FT_OK(c->close_send(sc));
  FT_OK(c->close_recv(rc));
  FT_OK(c->finalize());
}

// The listener gives up on a silent connection after
// WEFT_CONNECT_TIMEOUT_MS: it closes it, and keeps nothing for it.
void stray_dropped_after_timeout() {
  ::setenv("WEFT_CONNECT_TIMEOUT_MS", "300", 1);
  auto c = open_plugin(12);
  Handle handle;
  void* lc = do_listen(*c, test_device(*c), handle);
  Fd stray = connect_raw(handle);
  const auto start = std::chrono::steady_clock::now();
  bool closed = false;
  while (!closed) {
    void* rc = nullptr;
    FT_OK(c->accept(lc, &rc));
    FT_REQUIRE(rc == nullptr, "the listener accepted a connection that never sent its info");
    pollfd fd{stray.get(), POLLIN, 0};
    char byte = 0;
    closed = ::poll(&fd, 1, 10) > 0 && ::recv(stray.get(), &byte, 1, MSG_DONTWAIT) == 0;
    FT_REQUIRE(std::chrono::steady_clock::now() - start < std::chrono::seconds(10),
               "a silent side-channel connection still open after 10 s with "
               "WEFT_CONNECT_TIMEOUT_MS=300");
  }
  const auto waited = std::chrono::steady_clock::now() - start;
  FT_REQUIRE(waited >= std::chrono::milliseconds(300),
             "the listener closed a silent connection before WEFT_CONNECT_TIMEOUT_MS");
  FT_OK(c->close_listen(lc));
  FT_OK(c->finalize());
}

// Every listen shares the process's side-channel socket: a connect with
// the handle of a listen already closed is dropped there (the connector
// fails, it does not wait), while the other listens keep theirs.
void closed_listener_among_open_ones() {
  ::setenv("WEFT_CONNECT_TIMEOUT_MS", "20000", 1);
  auto c = open_plugin(12);
  const int dev = test_device(*c);
  Handle closed_handle, open_handle;
  void* closed_lc = do_listen(*c, dev, closed_handle);
  void* open_lc = do_listen(*c, dev, open_handle);
  FT_REQUIRE(std::memcmp(closed_handle.bytes, open_handle.bytes, sizeof(closed_handle.bytes)) != 0,
             "two listens gave the same handle");
  FT_OK(c->close_listen(closed_lc));

  void* stale = nullptr;
  ncclResult_t result = ncclSuccess;
  const auto start = std::chrono::steady_clock::now();
  while (result == ncclSuccess && stale == nullptr) {
    result = c->connect(dev, closed_handle.bytes, &stale);
    void* rc = nullptr;
    FT_OK(c->accept(open_lc, &rc));  // drives the shared socket
    FT_REQUIRE(rc == nullptr, "the open listener accepted the stale handle's connection");
    FT_REQUIRE(std::chrono::steady_clock::now() - start < std::chrono::seconds(10),
               "a connect to a closed listener still pending after 10 s");
  }
  FT_REQUIRE(result == ncclRemoteError && stale == nullptr,
             "a connect to a closed listener returned " << result << " instead of failing");

  void* sc = nullptr;
  void* rc = nullptr;
  while (!sc || !rc) {
    if (!sc) FT_OK(c->connect(dev, open_handle.bytes, &sc));
    if (!rc) FT_OK(c->accept(open_lc, &rc));
    FT_DEADLINE("connecting to the listen still open");
  }
  FT_OK(c->close_listen(open_lc));
  const size_t n = 4096;
  Buffer sbuf(n), rbuf(n);
  fill_pattern(sbuf.data(), n, pattern_seed(43, 12));
  {
    Mr ms(*c, sc, sbuf.data(), n), mr(*c, rc, rbuf.data(), n);
    void* rreq = post_irecv1(*c, rc, rbuf.data(), n, 3, mr.get());
    void* sreq = post_isend(*c, sc, sbuf.data(), n, 3, ms.get());
    wait_ok(*c, sreq, "send to the open listen's comm");
    FT_REQUIRE(wait_ok(*c, rreq, "receive on the open listen's comm") == static_cast<int>(n),
               "size");
    check_received(rbuf.data(), n, n, pattern_seed(43, 12), "receive on the open listen's comm");
  }
  FT_OK(c->close_send(sc));
  FT_OK(c->close_recv(rc));
  FT_OK(c->finalize());
}

}  // namespace

TEST_CASE("a connect to a closed listener fails while other listens share its socket", "[stray]") {
  auto r = run_one([&](Rank&) { closed_listener_among_open_ones(); });
  REQUIRE_RANKS(r);
}

TEST_CASE("a silent side-channel connection is dropped after WEFT_CONNECT_TIMEOUT_MS", "[stray]") {
  auto r = run_one([&](Rank&) { stray_dropped_after_timeout(); });
  REQUIRE_RANKS(r);
}

TEST_CASE("stray side-channel connections do not hold up a genuine connect", "[stray]") {
  const int v = GENERATE(12, 8);
  INFO("ABI v" << v);
  auto r = run_one([&](Rank&) { stray_then_genuine(v); });
  REQUIRE_RANKS(r);
}
