// The ABI rules NCCL relies on that NetClient's normal path never exercises:
// NULL request retry, the optional-receive-completion sentinel, NULL sizes,
// NULL device-handle pointers, NULL phandles, finalize(NULL), repeated
// init/finalize.
#include <sched.h>

#include <catch2/catch.hpp>

#include "net_ops.h"
#include "pattern.h"
#include "raw_calls.h"
#include "two_rank.h"

using namespace weft;
using namespace weft::ft;

TEST_CASE("isend NULL request means retry: sends posted before any receive all arrive", "[abi]") {
  const int v = GENERATE(filter(abi_version_selected, range(6, 13)));
  INFO("ABI v" << v);
  constexpr int kN = NCCL_NET_MAX_REQUESTS;
  const size_t n = 65536;
  auto r = run_two(
      [&](Rank& rk) {
        auto c = open_plugin(v);
        void* rc = recv_side_connect(*c, test_device(*c), *rk.peer);
        // Wait until the sender has posted what the plugin accepts.
        uint64_t accepted = rk.peer->recv_u64();
        (void)accepted;
        std::vector<Buffer> bufs;
        std::vector<std::unique_ptr<Mr>> mrs;
        std::vector<Pending> reqs(kN);
        for (int i = 0; i < kN; ++i) {
          bufs.emplace_back(n);
          mrs.push_back(std::make_unique<Mr>(*c, rc, bufs[i].data(), n));
          reqs[i].req =
              post_irecv1(*c, rc, bufs[i].data(), n, 0, mrs[i]->get(), [&] { progress(*c, reqs); });
          reqs[i].what = "receive #" + std::to_string(i);
        }
        wait_all(*c, reqs);
        for (int i = 0; i < kN; ++i) {
          FT_REQUIRE(reqs[i].sizes[0] == static_cast<int>(n),
                     reqs[i].what << ": size " << reqs[i].sizes[0]);
          check_received(bufs[i].data(), n, n, pattern_seed(4242, i), reqs[i].what);
        }
        rk.peer->sync("done");
        mrs.clear();
        FT_OK(c->close_recv(rc));
        FT_OK(c->finalize());
      },
      [&](Rank& rk) {
        auto c = open_plugin(v);
        void* sc = send_side_connect(*c, test_device(*c), *rk.peer);
        std::vector<Buffer> bufs;
        std::vector<std::unique_ptr<Mr>> mrs;
        std::vector<Pending> reqs(kN);
        for (int i = 0; i < kN; ++i) {
          bufs.emplace_back(n);
          fill_pattern(bufs[i].data(), n, pattern_seed(4242, i));
          mrs.push_back(std::make_unique<Mr>(*c, sc, bufs[i].data(), n));
          reqs[i].what = "send #" + std::to_string(i);
        }
        // Phase 1: the receiver has posted nothing. Post in order; a NULL
        // request is "not now" (never an error) and the same message must be
        // retried before the next one is posted.
        int next = 0, nulls = 0;
        for (int attempt = 0; attempt < 2000 && next < kN; ++attempt) {
          void* req = reinterpret_cast<void*>(0xdeadbeef);
          FT_OK(c->isend(sc, bufs[next].data(), n, 0, mrs[next]->get(), &req));
          FT_REQUIRE(req != reinterpret_cast<void*>(0xdeadbeef), "isend left *request untouched");
          if (req) {
            reqs[next++].req = req;
          } else {
            ++nulls;
          }
          progress(*c, reqs);
        }
        rk.peer->send_u64(static_cast<uint64_t>(next));
        // Phase 2: the receiver posts; retry the rest.
        for (; next < kN; ++next)
          reqs[next].req = post_isend(
              *c, sc, bufs[next].data(), n, 0, mrs[next]->get(), [&] { progress(*c, reqs); },
              &nulls);
        wait_all(*c, reqs);
        for (int i = 0; i < kN; ++i)
          FT_REQUIRE(reqs[i].sizes[0] == static_cast<int>(n),
                     reqs[i].what << ": size " << reqs[i].sizes[0]);
        rk.peer->sync("done");
        mrs.clear();
        FT_OK(c->close_send(sc));
        FT_OK(c->finalize());
      });
  REQUIRE_RANKS(r);
}

TEST_CASE("NULL device-handle pointers, NULL phandles, NULL sizes, receive sentinel", "[abi]") {
  const int v = GENERATE(filter(abi_version_selected, range(6, 13)));
  INFO("ABI v" << v);
  const std::vector<size_t> sizes = {0, 8, 4095, 1u << 20};
  const size_t cap = (1u << 20) + 64;
  auto r = run_two(
      [&](Rank& rk) {  // receiver: accept(..., NULL), irecv(phandles NULL), test(sizes NULL)
        auto c = open_plugin(v);
        Handle h;
        void* lc = do_listen(*c, test_device(*c), h);
        rk.peer->send_bytes(h.bytes, sizeof h.bytes);
        void* rc = nullptr;
        while (!rc) {
          FT_OK(raw_accept_null_dev(*c, lc, &rc));
          FT_DEADLINE("accept with a NULL recvDevComm");
        }
        FT_OK(c->close_listen(lc));
        Buffer buf(cap);
        {
          Mr mr(*c, rc, buf.data(), cap);
          for (size_t i = 0; i < sizes.size(); ++i) {
            const std::string what = "receive of " + std::to_string(sizes[i]);
            buf.poison();
            void* data = buf.data();
            size_t posted = cap;
            int tag = 5;
            void* mh = mr.get();
            void* req = nullptr;
            for (;;) {
              // v9+: NCCL may pre-set the optional-completion sentinel.
              req = v >= 9 ? reinterpret_cast<void*>(NCCL_NET_OPTIONAL_RECV_COMPLETION) : nullptr;
              FT_OK(raw_irecv_null_phandles(*c, rc, 1, &data, &posted, &tag, &mh, &req));
              FT_REQUIRE(req != reinterpret_cast<void*>(NCCL_NET_OPTIONAL_RECV_COMPLETION),
                         what << ": irecv left NCCL_NET_OPTIONAL_RECV_COMPLETION in *request");
              if (req) break;
              FT_DEADLINE("irecv returning NULL");
            }
            rk.peer->send_u64(i);
            int done = 0;
            for (;;) {
              ncclResult_t res = raw_test_null_sizes(*c, req, &done);
              FT_REQUIRE(res == ncclSuccess,
                         what << ": test(sizes=NULL) returned " << result_name(res));
              if (done) break;
              FT_DEADLINE(what);
            }
            check_received(buf.data(), sizes[i], cap, pattern_seed(31, i), what);
          }
        }
        rk.peer->sync("done");
        FT_OK(c->close_recv(rc));
        FT_OK(c->finalize());
      },
      [&](Rank& rk) {  // sender: connect(..., NULL), isend(phandle NULL), test(sizes NULL)
        auto c = open_plugin(v);
        const int dev = test_device(*c);
        Handle h;
        rk.peer->recv_bytes(h.bytes, sizeof h.bytes);
        void* sc = nullptr;
        while (!sc) {
          FT_OK(raw_connect_null_dev(*c, dev, h.bytes, &sc));
          FT_DEADLINE("connect with a NULL sendDevComm");
        }
        Buffer buf(cap);
        {
          Mr mr(*c, sc, buf.data(), cap);
          for (size_t i = 0; i < sizes.size(); ++i) {
            fill_pattern(buf.data(), sizes[i], pattern_seed(31, i));
            FT_REQUIRE(rk.peer->recv_u64() == i, "out of step");
            void* req = nullptr;
            while (!req) {
              FT_OK(raw_isend_null_phandle(*c, sc, buf.data(), sizes[i], 5, mr.get(), &req));
              FT_DEADLINE("isend returning NULL");
            }
            int done = 0;
            while (!done) {
              ncclResult_t res = raw_test_null_sizes(*c, req, &done);
              FT_REQUIRE(res == ncclSuccess, "send test(sizes=NULL) returned " << result_name(res));
              FT_DEADLINE("send completion");
            }
          }
        }
        rk.peer->sync("done");
        FT_OK(c->close_send(sc));
        FT_OK(c->finalize());
      });
  REQUIRE_RANKS(r);
}

TEST_CASE("finalize(NULL) is safe and init/finalize repeat", "[abi]") {
  const int v = GENERATE(filter(abi_version_selected, range(6, 13)));
  INFO("ABI v" << v);
  auto r = run_two(
      [&](Rank& rk) {
        std::unique_ptr<NetClient> c;
        for (int rep = 0; rep < 4; ++rep) {
          if (v >= 11) {
            if (!c) c = load_plugin(v);
            FT_OK(c->init(nullptr));
            int nd = 0;
            FT_OK(c->devices(&nd));
            FT_REQUIRE(nd > 0, "devices " << nd << " after init #" << rep);
            FT_OK(c->finalize());
          } else {
            c.reset();  // dlclose, load again, init again: per-process init
            c = open_plugin(v);
          }
        }
        if (v >= 11) {
          // Two contexts at once (two communicators), finalize(NULL) between.
          FT_OK(c->init(nullptr));
          auto c2 = open_plugin(v);
          (void)raw_finalize_null(*c);  // result unspecified; must not disturb live contexts
          (void)raw_finalize_null(*c2);
          FT_OK(c2->finalize());
        }
        // The live context still carries bytes.
        void* rc = recv_side_connect(*c, test_device(*c), *rk.peer);
        Buffer buf(65536);
        {
          Mr mr(*c, rc, buf.data(), buf.size());
          void* req = post_irecv1(*c, rc, buf.data(), buf.size(), 0, mr.get());
          int got = wait_ok(*c, req, "receive after init/finalize cycles");
          FT_REQUIRE(got == 65536, "size " << got);
          check_received(buf.data(), 65536, 65536, pattern_seed(8, 8), "receive after cycles");
        }
        FT_OK(c->close_recv(rc));
        FT_OK(c->finalize());
      },
      [&](Rank& rk) {
        auto c = load_plugin(v);
        if (v >= 11) {
          // finalize(NULL) before any init, as NCCL does after a failed init.
          (void)raw_finalize_null(*c);
        }
        FT_OK(c->init(nullptr));
        void* sc = send_side_connect(*c, test_device(*c), *rk.peer);
        Buffer buf(65536);
        fill_pattern(buf.data(), 65536, pattern_seed(8, 8));
        {
          Mr mr(*c, sc, buf.data(), buf.size());
          void* req = post_isend(*c, sc, buf.data(), 65536, 0, mr.get());
          wait_ok(*c, req, "send after init/finalize cycles");
        }
        FT_OK(c->close_send(sc));
        FT_OK(c->finalize());
      });
  REQUIRE_RANKS(r);
}
