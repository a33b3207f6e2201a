// A send larger than the posted receive must be an error on the receiver,
// never an overflow; the sender must not hang; the plugin keeps working.
#include <sched.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "net_ops.h"
#include "pattern.h"
#include "two_rank.h"

using namespace weft;
using namespace weft::ft;

TEST_CASE("truncation: send larger than the posted receive is an error, no overflow", "[trunc]") {
  const int v = GENERATE(filter(abi_version_selected, range(6, 13)));
  INFO("ABI v" << v);
  struct Case {
    size_t posted, sent;
  };
  const std::vector<Case> all = {{0, 1}, {4096, 4097}, {4096, 65536}, {1u << 20, 4u << 20}};
  // Each case in fresh processes: truncation on one connection, then a
  // verified transfer on a new connection (the plugin must keep working).
  const Case kase = GENERATE_COPY(from_range(all));
  const std::vector<Case> cases = {kase};
  INFO("receive posted " << kase.posted << " bytes, send of " << kase.sent);
  // Some transports never complete (nor fail) a truncated receive above a
  // size (libfabric's shm: 4 KiB); no plugin can report what its transport
  // never delivers. WEFT_TEST_TRUNC_MAX_SEND skips those cases.
  if (kase.sent > truncating_send_limit()) {
    WARN("skipped: send of " << kase.sent << " bytes is above WEFT_TEST_TRUNC_MAX_SEND="
                             << truncating_send_limit());
    return;
  }

  auto r = run_two(
      [&](Rank& rk) {  // receiver
        auto c = open_plugin(v);
        const int dev = test_device(*c);
        for (const Case& k : cases) {
          const std::string what = "receive posted " + std::to_string(k.posted) +
                                   " for a send of " + std::to_string(k.sent);
          if (std::getenv("WEFT_TEST_VERBOSE")) std::fprintf(stderr, "trunc: %s\n", what.c_str());
          void* rc = recv_side_connect(*c, dev, *rk.peer);
          Buffer buf(k.posted);
          {
            Mr mr(*c, rc, buf.data(), std::max<size_t>(1, k.posted));
            void* req = post_irecv1(*c, rc, buf.data(), k.posted, 3, mr.get());
            rk.peer->send_str("posted");
            int sizes[8] = {-1};
            ncclResult_t res = wait_result(*c, req, what, sizes);
            FT_REQUIRE(res != ncclSuccess, what << ": test() reported success (size " << sizes[0]
                                                << ") instead of an error");
            FT_REQUIRE(res != ncclInProgress, what << ": test() returned ncclInProgress");
            FT_REQUIRE(static_cast<int>(res) > 0 && res < ncclNumResults,
                       what << ": bad result " << res);
            std::string g = buf.check_guards();
            FT_REQUIRE(g.empty(), what << ": " << g);
            rk.peer->send_str("recv-finished");
          }
          FT_OK(c->close_recv(rc));
          rk.peer->sync("closed");
        }
        // The plugin still works after the errors.
        void* rc = recv_side_connect(*c, dev, *rk.peer);
        Buffer buf(65536);
        {
          Mr mr(*c, rc, buf.data(), buf.size());
          void* req = post_irecv1(*c, rc, buf.data(), buf.size(), 1, mr.get());
          int got = wait_ok(*c, req, "receive after truncation errors");
          FT_REQUIRE(got == 65536, "size " << got);
          check_received(buf.data(), 65536, 65536, pattern_seed(55, 1), "receive after truncation");
        }
        FT_OK(c->close_recv(rc));
        FT_OK(c->finalize());
      },
      [&](Rank& rk) {  // sender: success or error both fine, but bounded
        auto c = open_plugin(v);
        const int dev = test_device(*c);
        for (const Case& k : cases) {
          void* sc = send_side_connect(*c, dev, *rk.peer);
          Buffer buf(k.sent);
          fill_pattern(buf.data(), k.sent, pattern_seed(99, k.sent));
          {
            Mr mr(*c, sc, buf.data(), k.sent);
            FT_REQUIRE(rk.peer->recv_str() == "posted", "out of step");
            void* req = nullptr;
            bool finished = false, peer_finished = false;
            long after_peer = 0;
            // Bounded: once the receiver has its answer, give the send a
            // limited number of further polls, then close with it in flight.
            while (!finished && after_peer < 20000) {
              if (!req) {
                // An error here is as acceptable as one from test().
                finished = c->isend(sc, buf.data(), k.sent, 3, mr.get(), &req) != ncclSuccess;
              } else {
                ncclResult_t res;
                int sz[8];
                finished = poll_once(*c, req, &res, sz);
              }
              if (!peer_finished && rk.peer->readable()) {
                FT_REQUIRE(rk.peer->recv_str() == "recv-finished", "out of step");
                peer_finished = true;
              }
              if (peer_finished) ++after_peer;
              FT_DEADLINE("sending the oversized message (bounded wait)");
            }
            if (!peer_finished) FT_REQUIRE(rk.peer->recv_str() == "recv-finished", "out of step");
          }
          FT_OK(c->close_send(sc));
          rk.peer->sync("closed");
        }
        void* sc = send_side_connect(*c, dev, *rk.peer);
        Buffer buf(65536);
        fill_pattern(buf.data(), 65536, pattern_seed(55, 1));
        {
          Mr mr(*c, sc, buf.data(), buf.size());
          void* req = post_isend(*c, sc, buf.data(), 65536, 1, mr.get());
          wait_ok(*c, req, "send after truncation errors");
        }
        FT_OK(c->close_send(sc));
        FT_OK(c->finalize());
      });
  REQUIRE_RANKS(r);
}
