// Two processes with liveness links set their verbs comms up over the link
// between them (one TCP connection for all their comms), not over a TCP
// connection per comm to the listener hub: proved by handles whose hub
// address leads nowhere, which connect anyway. A connect to a listen that
// closed fails at once, naming why (the link's hello, which presents that
// listen's secret, is refused), instead of waiting for its timeout.
// The connect flavours (softverbs-nolinks, -links0, -links1) cover the
// hub path.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "core/byte_codec.h"
#include "core/fd.h"
#include "core/handle_header.h"
#include "core/socket_address.h"
#include "log_capture.h"
#include "net_ops.h"
#include "pattern.h"
#include "two_rank.h"

using namespace weft;
using namespace weft::ft;

namespace {

constexpr int kComms = 8;

// A local TCP port nobody listens on (bound, then closed).
uint16_t dead_port() {
  Fd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  FT_REQUIRE(::bind(fd.get(), reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0,
             "bind: " << std::strerror(errno));
  socklen_t length = sizeof(address);
  FT_REQUIRE(::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&address), &length) == 0,
             "getsockname");
  return ntohs(address.sin_port);
}

// Points the handle's hub address at `port` on the loopback address,
// keeping what follows it (the process identity and mailbox).
void break_hub_address(Handle* handle, uint16_t port) {
  ListenHandle decoded;
  std::string error;
  FT_REQUIRE(
      decode_handle(handle->bytes, sizeof handle->bytes, TransportId::Verbs, &decoded, &error),
      "the listen handle does not decode as a verbs handle: " << error);
  FT_REQUIRE(decoded.payload_size > SocketAddress::kPackedSize,
             "the listen handle carries no link identity ("
                 << static_cast<int>(decoded.payload_size)
                 << " payload bytes): does this process have liveness links?");
  in_addr loopback{};
  loopback.s_addr = htonl(INADDR_LOOPBACK);
  SocketAddress::from_ipv4(loopback, port).pack(decoded.payload);
  encode_handle(decoded, handle->bytes);
}

void listen_side(Rank& r) {
  auto c = open_plugin(12);
  const int dev = test_device(*c);
  const uint16_t port = dead_port();
  std::vector<void*> listens(kComms);
  for (int i = 0; i < kComms; ++i) {
    Handle handle;
    listens[i] = do_listen(*c, dev, handle);
    break_hub_address(&handle, port);
    r.peer->send_bytes(handle.bytes, sizeof handle.bytes);
  }
  std::vector<void*> comms(kComms, nullptr);
  for (int done = 0; done < kComms;) {
    for (int i = 0; i < kComms; ++i) {
      if (comms[i] != nullptr) continue;
      FT_OK(c->accept(listens[i], &comms[i]));
      if (comms[i] != nullptr) ++done;
    }
    FT_DEADLINE("accepting comms whose handles name a dead hub port");
  }
  for (void* listen : listens) FT_OK(c->close_listen(listen));
  const size_t n = 64 * 1024;
  for (int i = 0; i < kComms; ++i) {
    Buffer buffer(n);
    Mr mr(*c, comms[i], buffer.data(), n);
    void* request = post_irecv1(*c, comms[i], buffer.data(), n, i, mr.get());
    FT_REQUIRE(wait_ok(*c, request, "receive over a link-connected comm") == static_cast<int>(n),
               "size");
    check_received(static_cast<const uint8_t*>(buffer.data()), n, n, pattern_seed(51, i),
                   "receive over a link-connected comm");
  }
  r.peer->sync("received");
  for (void* comm : comms) FT_OK(c->close_recv(comm));
  FT_OK(c->finalize());
}

void connect_side(Rank& r) {
  auto c = open_plugin(12);
  const int dev = test_device(*c);
  std::vector<Handle> handles(kComms);
  for (Handle& handle : handles) r.peer->recv_bytes(handle.bytes, sizeof handle.bytes);
  std::vector<void*> comms(kComms, nullptr);
  for (int done = 0; done < kComms;) {
    for (int i = 0; i < kComms; ++i) {
      if (comms[i] != nullptr) continue;
      FT_OK(c->connect(dev, handles[i].bytes, &comms[i]));
      if (comms[i] != nullptr) ++done;
    }
    FT_DEADLINE("connecting with handles whose hub port is dead (the link should carry them)");
  }
  const size_t n = 64 * 1024;
  for (int i = 0; i < kComms; ++i) {
    Buffer buffer(n);
    fill_pattern(buffer.data(), n, pattern_seed(51, i));
    Mr mr(*c, comms[i], buffer.data(), n);
    void* request = post_isend(*c, comms[i], buffer.data(), n, i, mr.get());
    wait_ok(*c, request, "send over a link-connected comm");
  }
  r.peer->sync("received");
  for (void* comm : comms) FT_OK(c->close_send(comm));
  FT_OK(c->finalize());
}

// Rank 0 closes a listen whose handle rank 1 then uses, and keeps another
// listen accepting (a process reads its link when it calls weft).
void closed_listen_side(Rank& r) {
  ::setenv("WEFT_CONNECT_TIMEOUT_MS", "30000", 1);
  auto c = open_plugin(12);
  const int dev = test_device(*c);
  Handle closed_handle, open_handle;
  void* closed = do_listen(*c, dev, closed_handle);
  void* open = do_listen(*c, dev, open_handle);
  FT_OK(c->close_listen(closed));
  r.peer->send_bytes(closed_handle.bytes, sizeof closed_handle.bytes);
  while (!r.peer->readable()) {
    void* comm = nullptr;
    FT_OK(c->accept(open, &comm));
    FT_REQUIRE(comm == nullptr, "the open listen accepted the closed one's connector");
    FT_DEADLINE("waiting for the connector to a closed listen to give up");
  }
  r.peer->sync("failed");
  FT_OK(c->close_listen(open));
  FT_OK(c->finalize());
}

void connect_to_closed_side(Rank& r) {
  ::setenv("WEFT_CONNECT_TIMEOUT_MS", "30000", 1);
  logged_lines().clear();
  auto c = load_plugin(12);
  FT_OK(c->init(capture_log));
  const int dev = test_device(*c);
  Handle handle;
  r.peer->recv_bytes(handle.bytes, sizeof handle.bytes);
  const auto start = std::chrono::steady_clock::now();
  void* comm = nullptr;
  ncclResult_t result = ncclSuccess;
  while (result == ncclSuccess && comm == nullptr) {
    result = c->connect(dev, handle.bytes, &comm);
    FT_REQUIRE(std::chrono::steady_clock::now() - start < std::chrono::seconds(10),
               "a connect to a closed listen still pending after 10 s (WEFT_CONNECT_TIMEOUT_MS "
               "is 30 s: it should fail at once)");
  }
  FT_REQUIRE(result == ncclRemoteError && comm == nullptr,
             "a connect to a closed listen returned " << result << " instead of failing");
  const std::string log = logged_text(NCCL_LOG_WARN);
  // Its link's hello presented the closed listen's secret: refused.
  FT_REQUIRE(log.find("its process refused the link's hello") != std::string::npos &&
                 log.find("stale handle") != std::string::npos,
             "the warning does not say why the connect failed:\n"
                 << log);
  r.peer->sync("failed");
  FT_OK(c->finalize());
}

}  // namespace

TEST_CASE("comms between processes with links connect over the link, not the hub", "[link_setup]") {
  REQUIRE_RANKS(run_two(listen_side, connect_side));
}

TEST_CASE("a connect over the link to a closed listen fails at once, saying why", "[link_setup]") {
  REQUIRE_RANKS(run_two(closed_listen_side, connect_to_closed_side));
}
