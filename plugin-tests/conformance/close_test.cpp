// Closing comms with requests still in flight, then finalize: no crash, no
// hang; afterwards a fresh init carries verified bytes again.
#include <sched.h>

#include <catch2/catch.hpp>

#include "net_ops.h"
#include "pattern.h"
#include "restart.h"
#include "two_rank.h"

using namespace weft;
using namespace weft::ft;

TEST_CASE("close with in-flight requests, finalize, then init again and transfer", "[close]") {
  const int v = GENERATE(filter(abi_version_selected, range(6, 13)));
  INFO("ABI v" << v);
  const size_t n = 1u << 20;

  auto r = run_two(
      [&](Rank& rk) {  // receiver
        auto c = open_plugin(v);
        const int dev = test_device(*c);
        void* rc = recv_side_connect(*c, dev, *rk.peer);
        // A listen comm whose connection is never accepted.
        Handle h2;
        void* lc2 = do_listen(*c, dev, h2);
        rk.peer->send_bytes(h2.bytes, sizeof h2.bytes);
        // A listen comm nobody connects to.
        Handle h3;
        void* lc3 = do_listen(*c, dev, h3);

        std::vector<Buffer> bufs;
        for (int i = 0; i < 4; ++i) bufs.emplace_back(n);
        std::vector<std::unique_ptr<Mr>> mrs;
        for (auto& b : bufs) mrs.push_back(std::make_unique<Mr>(*c, rc, b.data(), n));
        std::vector<void*> reqs;
        for (int i = 0; i < 4; ++i)
          reqs.push_back(post_irecv1(*c, rc, bufs[i].data(), n, i, mrs[i]->get()));
        // Only the first one is ever completed by the peer.
        int got = wait_ok(*c, reqs[0], "first receive");
        FT_REQUIRE(got == static_cast<int>(n), "size " << got);
        check_received(bufs[0].data(), n, n, pattern_seed(66, 0), "first receive");
        // Poll the rest a little (partial progress), then close under them.
        std::vector<bool> finished(4, false);
        for (int k = 0; k < 100; ++k)
          for (int i = 1; i < 4; ++i) {
            ncclResult_t res;
            int sz[8];
            if (!finished[i]) finished[i] = poll_once(*c, reqs[i], &res, sz);
          }
        rk.peer->sync("closing");
        // NCCL's order: deregister, then close.
        mrs.clear();
        FT_OK(c->close_recv(rc));
        FT_OK(c->close_listen(lc2));
        FT_OK(c->close_listen(lc3));
        FT_OK(c->finalize());
        rk.peer->sync("finalized");
        transfer_after_restart(c, v, rk, true, pattern_seed(77, v));
      },
      [&](Rank& rk) {  // sender
        auto c = open_plugin(v);
        const int dev = test_device(*c);
        void* sc = send_side_connect(*c, dev, *rk.peer);
        Handle h2;
        rk.peer->recv_bytes(h2.bytes, sizeof h2.bytes);
        void* sc2 = nullptr;  // connect to a listener that never accepts
        for (int k = 0; k < 200 && !sc2; ++k) FT_OK(c->connect(dev, h2.bytes, &sc2));

        std::vector<Buffer> bufs;
        for (int i = 0; i < 6; ++i) bufs.emplace_back(4 * n);
        std::vector<std::unique_ptr<Mr>> mrs;
        for (auto& b : bufs) mrs.push_back(std::make_unique<Mr>(*c, sc, b.data(), 4 * n));
        fill_pattern(bufs[0].data(), n, pattern_seed(66, 0));
        void* first = post_isend(*c, sc, bufs[0].data(), n, 0, mrs[0]->get());
        wait_ok(*c, first, "first send");
        // More sends than the peer will ever take, some bigger than its
        // receives (where the transport reports a truncation:
        // truncating_send_limit); post what the plugin accepts, poll a
        // little, close.
        const size_t larger = std::min(4 * n, std::max(n, truncating_send_limit()));
        std::vector<void*> reqs;
        for (int i = 1; i < 6; ++i) {
          void* req = nullptr;
          FT_OK(c->isend(sc, bufs[i].data(), (i % 2 ? n : larger), i, mrs[i]->get(), &req));
          if (req) reqs.push_back(req);
        }
        std::vector<bool> finished(reqs.size(), false);
        for (int k = 0; k < 100; ++k)
          for (size_t i = 0; i < reqs.size(); ++i) {
            ncclResult_t res;
            int sz[8];
            // may finish or fail; either is fine (a finished one is not polled again)
            if (!finished[i]) finished[i] = poll_once(*c, reqs[i], &res, sz);
          }
        rk.peer->sync("closing");
        mrs.clear();
        FT_OK(c->close_send(sc));
        if (sc2) FT_OK(c->close_send(sc2));
        FT_OK(c->finalize());
        rk.peer->sync("finalized");
        transfer_after_restart(c, v, rk, false, pattern_seed(77, v));
      });
  REQUIRE_RANKS(r);
}

TEST_CASE("close immediately after posting, before any completion", "[close]") {
  const int v = GENERATE(filter(abi_version_selected, range(6, 13)));
  INFO("ABI v" << v);
  auto r = run_two(
      [&](Rank& rk) {
        auto c = open_plugin(v);
        void* rc = recv_side_connect(*c, test_device(*c), *rk.peer);
        Buffer b(65536);
        {
          Mr mr(*c, rc, b.data(), b.size());
          for (int i = 0; i < 8; ++i) {
            void* req = nullptr;
            FT_OK(c->irecv(rc, 1, std::vector<void*>{b.data()}.data(),
                           std::vector<size_t>{b.size()}.data(), std::vector<int>{i}.data(),
                           std::vector<void*>{mr.get()}.data(), &req));
          }
          rk.peer->sync("posted");
        }
        FT_OK(c->close_recv(rc));
        FT_OK(c->finalize());
        rk.peer->sync("finalized");
        transfer_after_restart(c, v, rk, true, pattern_seed(77, v));
      },
      [&](Rank& rk) {
        auto c = open_plugin(v);
        void* sc = send_side_connect(*c, test_device(*c), *rk.peer);
        Buffer b(4u << 20);
        {
          Mr mr(*c, sc, b.data(), b.size());
          rk.peer->sync("posted");
          for (int i = 0; i < 8; ++i) {
            void* req = nullptr;
            // Odd ones larger than the receive (truncated), where the
            // transport reports that (truncating_send_limit).
            const size_t large =
                std::min(b.size(), std::max<size_t>(truncating_send_limit(), 1000));
            FT_OK(c->isend(sc, b.data(), i % 2 ? large : 1000, i, mr.get(), &req));
          }
        }
        FT_OK(c->close_send(sc));
        FT_OK(c->finalize());
        rk.peer->sync("finalized");
        transfer_after_restart(c, v, rk, false, pattern_seed(77, v));
      });
  REQUIRE_RANKS(r);
}

TEST_CASE("sequential connections in one init: connect, transfer, close, again", "[close]") {
  const int v = GENERATE(filter(abi_version_selected, range(6, 13)));
  INFO("ABI v" << v);
  constexpr int kConns = 4;
  const size_t n = 65536 + 3;
  auto r = run_two(
      [&](Rank& rk) {
        auto c = open_plugin(v);
        const int dev = test_device(*c);
        for (int i = 0; i < kConns; ++i) {
          void* rc = recv_side_connect(*c, dev, *rk.peer);
          Buffer b(n);
          {
            Mr mr(*c, rc, b.data(), n);
            void* req = post_irecv1(*c, rc, b.data(), n, 0, mr.get());
            const std::string what = "receive on connection #" + std::to_string(i);
            int got = wait_ok(*c, req, what);
            FT_REQUIRE(got == static_cast<int>(n), what << ": size " << got);
            check_received(b.data(), n, n, pattern_seed(88, i), what);
          }
          rk.peer->sync("received");
          FT_OK(c->close_recv(rc));
        }
        FT_OK(c->finalize());
      },
      [&](Rank& rk) {
        auto c = open_plugin(v);
        const int dev = test_device(*c);
        for (int i = 0; i < kConns; ++i) {
          void* sc = send_side_connect(*c, dev, *rk.peer);
          Buffer b(n);
          fill_pattern(b.data(), n, pattern_seed(88, i));
          {
            Mr mr(*c, sc, b.data(), n);
            void* req = post_isend(*c, sc, b.data(), n, 0, mr.get());
            wait_ok(*c, req, "send on connection #" + std::to_string(i));
          }
          rk.peer->sync("received");
          FT_OK(c->close_send(sc));
        }
        FT_OK(c->finalize());
      });
  REQUIRE_RANKS(r);
}
