#include "restart.h"

#include "net_ops.h"
#include "pattern.h"

namespace weft::ft {

void transfer_after_restart(std::unique_ptr<NetClient>& c, int v, Rank& rk, bool receiver,
                            uint64_t seed) {
  if (v >= 11 && c) {
    FT_OK(c->init(nullptr));
  } else {
    c.reset();
    c = open_plugin(v);
  }
  const int dev = test_device(*c);
  const size_t n = 1u << 20;
  Buffer buf(n);
  if (receiver) {
    void* rc = recv_side_connect(*c, dev, *rk.peer);
    {
      Mr mr(*c, rc, buf.data(), n);
      void* req = post_irecv1(*c, rc, buf.data(), n, 0, mr.get());
      int got = wait_ok(*c, req, "receive after re-init");
      FT_REQUIRE(got == static_cast<int>(n), "size " << got);
      check_received(buf.data(), n, n, seed, "receive after re-init");
    }
    FT_OK(c->close_recv(rc));
  } else {
    void* sc = send_side_connect(*c, dev, *rk.peer);
    fill_pattern(buf.data(), n, seed);
    {
      Mr mr(*c, sc, buf.data(), n);
      void* req = post_isend(*c, sc, buf.data(), n, 0, mr.get());
      wait_ok(*c, req, "send after re-init");
    }
    FT_OK(c->close_send(sc));
  }
  rk.peer->sync("after-restart");
  FT_OK(c->finalize());
}

}  // namespace weft::ft
