// One rank of the two-namespace test (see netns.sh): run inside a network
// namespace with `ip netns exec`. The server listens on a TCP bootstrap
// socket, sends the plugin's handle to the client, and receives messages of
// every size, checking every byte; the client connects and sends. Every ABI
// version v6..v12 is exercised in turn.
//
//   weft-netns-rank --server <bind-addr> <port>
//   weft-netns-rank --client <server-addr> <port>
// With `--vanish <dir>` (vanish.sh) the ranks instead move one message,
// create <dir>/ready-<role>, wait for <dir>/cut (the script then drops
// every packet between the namespaces), and post again: the server a
// receive, the client sends until one does not complete. Each must end in
// ncclRemoteError (the liveness link's keepalive) within the bound.
// Exit: 0 passed, 1 failed (message on stderr).
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>

#include "channel.h"
#include "net_ops.h"
#include "pattern.h"

using namespace weft;
using namespace weft::ft;

namespace {

const std::vector<size_t> kSizes = {0, 1, 4095, 65536, 1u << 20, 64u << 20};

void run_server(Channel& ch, int v) {
  auto c = open_plugin(v);
  NetDeviceInfo info;
  const int dev = test_device(*c);
  FT_OK(c->properties(dev, &info));
  void* rc = recv_side_connect(*c, dev, ch);
  const size_t cap = kSizes.back() + 4096;
  Buffer buf(cap);
  {
    Mr mr(*c, rc, buf.data(), cap);
    for (size_t i = 0; i < kSizes.size(); ++i) {
      const std::string what = "v" + std::to_string(v) + " receive of " + std::to_string(kSizes[i]);
      buf.poison();
      void* req = post_irecv1(*c, rc, buf.data(), cap, 0, mr.get());
      ch.send_u64(i);
      int got = wait_ok(*c, req, what);
      FT_REQUIRE(got == static_cast<int>(kSizes[i]), what << ": size " << got);
      check_received(buf.data(), kSizes[i], cap, pattern_seed(v * 10 + 3, i), what);
      std::string g = buf.check_guards();
      FT_REQUIRE(g.empty(), what << ": " << g);
    }
  }
  ch.sync("done");
  FT_OK(c->close_recv(rc));
  FT_OK(c->finalize());
  std::fprintf(stderr, "netns server: v%d over device '%s': %zu sizes up to %zu bytes verified\n",
               v, info.name.c_str(), kSizes.size(), kSizes.back());
}

void run_client(Channel& ch, int v) {
  auto c = open_plugin(v);
  void* sc = send_side_connect(*c, test_device(*c), ch);
  Buffer buf(kSizes.back());
  {
    Mr mr(*c, sc, buf.data(), buf.size());
    for (size_t i = 0; i < kSizes.size(); ++i) {
      fill_pattern(buf.data(), kSizes[i], pattern_seed(v * 10 + 3, i));
      FT_REQUIRE(ch.recv_u64() == i, "out of step");
      void* req = post_isend(*c, sc, buf.data(), kSizes[i], 0, mr.get());
      wait_ok(*c, req, "v" + std::to_string(v) + " send of " + std::to_string(kSizes[i]));
    }
  }
  ch.sync("done");
  FT_OK(c->close_send(sc));
  FT_OK(c->finalize());
}

// The peer's host vanishes (no FIN, no RST): the survivor's requests must
// fail, not hang.
void run_vanish(Channel& ch, bool server, const std::string& dir) {
  constexpr size_t kSize = 1 << 20;
  constexpr auto kBound = std::chrono::seconds(60);
  auto c = open_plugin(12);
  const int dev = test_device(*c);
  void* comm = server ? recv_side_connect(*c, dev, ch) : send_side_connect(*c, dev, ch);
  ncclResult_t result = ncclSuccess;
  {
    // Deregistered (Mr) before the comm closes.
    Buffer buf(kSize);
    Mr mr(*c, comm, buf.data(), kSize);
    fill_pattern(buf.data(), kSize, pattern_seed(77, 0));
    void* first = server ? post_irecv1(*c, comm, buf.data(), kSize, 0, mr.get())
                         : post_isend(*c, comm, buf.data(), kSize, 0, mr.get());
    wait_ok(*c, first, "the message before the cut");
    if (server) check_received(buf.data(), kSize, kSize, pattern_seed(77, 0), "before the cut");
    ch.sync("exchanged");
    const std::string ready = dir + "/ready-" + (server ? "server" : "client");
    FILE* marker = std::fopen(ready.c_str(), "w");
    FT_REQUIRE(marker != nullptr, "cannot create " << ready);
    std::fclose(marker);
    const auto wait_until = std::chrono::steady_clock::now() + kBound;
    while (access((dir + "/cut").c_str(), F_OK) != 0) {
      FT_REQUIRE(std::chrono::steady_clock::now() < wait_until, "the script never cut the link");
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    const auto cut = std::chrono::steady_clock::now();
    // A sender's messages may still fit the socket buffers: keep sending.
    for (int i = 1; result == ncclSuccess; ++i) {
      void* req = nullptr;
      void* data[1] = {buf.data()};
      size_t sizes[1] = {kSize};
      int tags[1] = {i};
      void* mhandles[1] = {mr.get()};
      for (;;) {
        result = server ? c->irecv(comm, 1, data, sizes, tags, mhandles, &req)
                        : c->isend(comm, buf.data(), kSize, i, mr.get(), &req);
        if (result != ncclSuccess || req != nullptr) break;
        FT_REQUIRE(std::chrono::steady_clock::now() - cut < kBound,
                   "posting kept returning no request for " << kBound.count() << " s (a hang)");
      }
      while (result == ncclSuccess && req != nullptr) {
        int done = 0;
        int reported[8] = {};
        result = c->test(req, &done, reported);
        if (done) break;
        FT_REQUIRE(
            std::chrono::steady_clock::now() - cut < kBound,
            "a request neither finished nor failed within " << kBound.count() << " s (a hang)");
      }
    }
    auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
        std::chrono::steady_clock::now() - cut);
    std::fprintf(stderr, "netns %s: %s %lld ms after the cut\n", server ? "server" : "client",
                 result_name(result), static_cast<long long>(ms.count()));
    FT_REQUIRE(result == ncclRemoteError, "expected ncclRemoteError, got " << result_name(result));
  }
  if (server) {
    c->close_recv(comm);
  } else {
    c->close_send(comm);
  }
  FT_OK(c->finalize());
}

}  // namespace

int main(int argc, char** argv) {
  const bool vanish = argc == 6 && std::strcmp(argv[4], "--vanish") == 0;
  if ((argc != 4 && !vanish) ||
      (std::strcmp(argv[1], "--server") && std::strcmp(argv[1], "--client"))) {
    std::fprintf(stderr, "usage: %s --server|--client <addr> <port> [--vanish <dir>]\n", argv[0]);
    return 2;
  }
  const bool server = std::strcmp(argv[1], "--server") == 0;
  const std::string addr = argv[2];
  const int port = std::atoi(argv[3]);
  set_rank_label(server ? "netns server" : "netns client");
  start_deadline();
  try {
    Channel ch(tcp_rank_socket(server, addr, port));
    if (vanish) {
      run_vanish(ch, server, argv[5]);
      std::fprintf(stderr, "%s: passed\n", server ? "netns server" : "netns client");
      return 0;
    }
    for (int v = 6; v <= 12; ++v) {
      if (server)
        run_server(ch, v);
      else
        run_client(ch, v);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "FAILED: %s\n", e.what());
    return 1;
  }
  std::fprintf(stderr, "%s: passed\n", server ? "netns server" : "netns client");
  return 0;
}
