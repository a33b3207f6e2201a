// One rank of the two-namespace test (see netns.sh): run inside a network
// namespace with `ip netns exec`. The server listens on a TCP bootstrap
// socket, sends the plugin's handle to the client, and receives messages of
// every size, checking every byte; the client connects and sends. Every ABI
// version v6..v12 is exercised in turn.
//
//   weft-netns-rank --server <bind-addr> <port>
//   weft-netns-rank --client <server-addr> <port>
// Exit: 0 passed, 1 failed (message on stderr).
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>

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

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4 || (std::strcmp(argv[1], "--server") && std::strcmp(argv[1], "--client"))) {
    std::fprintf(stderr, "usage: %s --server|--client <addr> <port>\n", argv[0]);
    return 2;
  }
  const bool server = std::strcmp(argv[1], "--server") == 0;
  const std::string addr = argv[2];
  const int port = std::atoi(argv[3]);
  set_rank_label(server ? "netns server" : "netns client");
  start_deadline();
  try {
    Channel ch(tcp_rank_socket(server, addr, port));
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
