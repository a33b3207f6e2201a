// Many comms at once, comms driven from several threads, and connect/accept
// driven alternately from one thread of one process.
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <thread>

#include "net_ops.h"
#include "pattern.h"
#include "two_rank.h"

using namespace weft;
using namespace weft::ft;

TEST_CASE("min(64, maxComms) comm pairs at once: listen/connect/accept, traffic on all, close all",
          "[pairs64]") {
  const int v = GENERATE(filter(abi_version_selected, range(6, 13)));
  INFO("ABI v" << v);
  // 64 pairs, or fewer when the plugin's maxComms says so (both ranks read it).
  auto pairs_of = [](NetClient& c) {
    NetDeviceInfo info;
    FT_OK(c.properties(test_device(c), &info));
    return std::min(64, info.max_comms);
  };
  auto size_of = [](int i) { return static_cast<size_t>(65536 + 17 * i); };

  auto r = run_two(
      [&](Rank& rk) {  // receiver: 64 listens, accepts driven round-robin
        auto c = open_plugin(v);
        const int dev = test_device(*c);
        const int pairs = pairs_of(*c);
        std::vector<void*> lcs(pairs), rcs(pairs, nullptr);
        for (int i = 0; i < pairs; ++i) {
          Handle h;
          lcs[i] = do_listen(*c, dev, h);
          rk.peer->send_bytes(h.bytes, sizeof h.bytes);
        }
        for (int left = pairs; left > 0;) {
          for (int i = 0; i < pairs; ++i) {
            if (rcs[i]) continue;
            FT_OK(c->accept(lcs[i], &rcs[i]));
            if (rcs[i]) {
              FT_OK(c->close_listen(lcs[i]));
              --left;
            }
          }
          FT_DEADLINE("accepting comms (" + std::to_string(left) + " left)");
        }
        for (int round = 0; round < 2; ++round) {
          std::vector<Buffer> bufs;
          std::vector<std::unique_ptr<Mr>> mrs;
          std::vector<Pending> reqs(pairs);
          for (int i = 0; i < pairs; ++i) {
            bufs.emplace_back(size_of(i));
            mrs.push_back(std::make_unique<Mr>(*c, rcs[i], bufs[i].data(), size_of(i)));
            reqs[i].req = post_irecv1(*c, rcs[i], bufs[i].data(), size_of(i), i, mrs[i]->get());
            reqs[i].what = "receive on comm " + std::to_string(i);
          }
          wait_all(*c, reqs);
          for (int i = 0; i < pairs; ++i) {
            FT_REQUIRE(reqs[i].sizes[0] == static_cast<int>(size_of(i)),
                       reqs[i].what << ": size " << reqs[i].sizes[0]);
            check_received(bufs[i].data(), size_of(i), size_of(i),
                           pattern_seed(round * 100 + i, 64), reqs[i].what);
          }
          rk.peer->sync("round");
        }
        for (void* rc : rcs) FT_OK(c->close_recv(rc));
        FT_OK(c->finalize());
      },
      [&](Rank& rk) {  // sender
        auto c = open_plugin(v);
        const int dev = test_device(*c);
        const int pairs = pairs_of(*c);
        std::vector<Handle> hs(pairs);
        for (auto& h : hs) rk.peer->recv_bytes(h.bytes, sizeof h.bytes);
        std::vector<void*> scs(pairs, nullptr);
        for (int left = pairs; left > 0;) {
          for (int i = 0; i < pairs; ++i) {
            if (scs[i]) continue;
            FT_OK(c->connect(dev, hs[i].bytes, &scs[i]));
            if (scs[i]) --left;
          }
          FT_DEADLINE("connecting comms (" + std::to_string(left) + " left)");
        }
        for (int round = 0; round < 2; ++round) {
          std::vector<Buffer> bufs;
          std::vector<std::unique_ptr<Mr>> mrs;
          std::vector<Pending> reqs(pairs);
          for (int i = 0; i < pairs; ++i) {
            bufs.emplace_back(size_of(i));
            fill_pattern(bufs[i].data(), size_of(i), pattern_seed(round * 100 + i, 64));
            mrs.push_back(std::make_unique<Mr>(*c, scs[i], bufs[i].data(), size_of(i)));
          }
          // Post in reverse comm order, driving earlier sends on NULL.
          for (int i = pairs - 1; i >= 0; --i) {
            reqs[i].what = "send on comm " + std::to_string(i);
            reqs[i].req = post_isend(*c, scs[i], bufs[i].data(), size_of(i), i, mrs[i]->get(),
                                     [&] { progress(*c, reqs); });
          }
          wait_all(*c, reqs);
          rk.peer->sync("round");
        }
        for (void* sc : scs) FT_OK(c->close_send(sc));
        FT_OK(c->finalize());
      });
  REQUIRE_RANKS(r);
}

namespace {

// Runs fn(t) in `n` threads; rethrows the first failure after joining all.
template <class F>
void in_threads(int n, F fn) {
  std::vector<std::string> errors(static_cast<size_t>(n));
  std::vector<std::thread> ts;
  for (int t = 0; t < n; ++t)
    ts.emplace_back([&, t] {
      try {
        fn(t);
      } catch (const std::exception& e) {
        errors[static_cast<size_t>(t)] = e.what();
      }
    });
  for (auto& th : ts) th.join();
  std::string all;
  for (int t = 0; t < n; ++t)
    if (!errors[static_cast<size_t>(t)].empty())
      all += "\n  thread " + std::to_string(t) + ": " + errors[static_cast<size_t>(t)];
  FT_REQUIRE(all.empty(), "thread failures:" << all);
}

}  // namespace

TEST_CASE("comms driven from 4 threads concurrently", "[threads]") {
  const int v = GENERATE(filter(abi_version_selected, range(6, 13)));
  INFO("ABI v" << v);
  constexpr int kThreads = 4, kIters = 12, kDepth = 4;
  auto size_of = [](int t, int it, int k) -> size_t {
    static const size_t base[] = {1, 4095, 65536, (1u << 20) + 3};
    return base[(t + it + k) % 4] + static_cast<size_t>(t);
  };
  const size_t cap = (1u << 20) + 16;

  auto r = run_two(
      [&](Rank& rk) {  // receiver
        auto c = open_plugin(v);
        const int dev = test_device(*c);
        std::vector<void*> lcs(kThreads);
        for (int t = 0; t < kThreads; ++t) {
          Handle h;
          lcs[t] = do_listen(*c, dev, h);
          rk.peer->send_bytes(h.bytes, sizeof h.bytes);
        }
        std::atomic<bool> stop{false};
        std::thread app([&] {  // application thread querying devices meanwhile
          while (!stop) {
            int nd = 0;
            NetDeviceInfo info;
            c->devices(&nd);
            c->properties(dev, &info);
            std::this_thread::yield();
          }
        });
        try {
          in_threads(kThreads, [&](int t) {
            set_rank_label("rank 0 thread " + std::to_string(t));
            void* rc = accept_until_ready(*c, lcs[t]);
            FT_OK(c->close_listen(lcs[t]));
            std::vector<Buffer> bufs;
            std::vector<std::unique_ptr<Mr>> mrs;
            for (int k = 0; k < kDepth; ++k) {
              bufs.emplace_back(cap);
              mrs.push_back(std::make_unique<Mr>(*c, rc, bufs[k].data(), cap));
            }
            for (int it = 0; it < kIters; ++it) {
              std::vector<Pending> reqs(kDepth);
              for (int k = 0; k < kDepth; ++k) {
                bufs[k].poison();
                reqs[k].req = post_irecv1(*c, rc, bufs[k].data(), cap, k, mrs[k]->get());
                reqs[k].what = "thread " + std::to_string(t) + " iter " + std::to_string(it) +
                               " recv " + std::to_string(k);
              }
              wait_all(*c, reqs);
              for (int k = 0; k < kDepth; ++k) {
                size_t s = size_of(t, it, k);
                FT_REQUIRE(reqs[k].sizes[0] == static_cast<int>(s),
                           reqs[k].what << ": size " << reqs[k].sizes[0] << " expected " << s);
                check_received(bufs[k].data(), s, cap, pattern_seed(t * 1000 + it, k),
                               reqs[k].what);
              }
            }
            mrs.clear();
            FT_OK(c->close_recv(rc));
          });
        } catch (...) {
          stop = true;
          app.join();
          throw;
        }
        stop = true;
        app.join();
        rk.peer->sync("done");
        FT_OK(c->finalize());
      },
      [&](Rank& rk) {  // sender
        auto c = open_plugin(v);
        const int dev = test_device(*c);
        std::vector<Handle> hs(kThreads);
        for (auto& h : hs) rk.peer->recv_bytes(h.bytes, sizeof h.bytes);
        in_threads(kThreads, [&](int t) {
          set_rank_label("rank 1 thread " + std::to_string(t));
          void* sc = connect_until_ready(*c, dev, hs[t]);
          std::vector<Buffer> bufs;
          std::vector<std::unique_ptr<Mr>> mrs;
          for (int k = 0; k < kDepth; ++k) {
            bufs.emplace_back(cap);
            mrs.push_back(std::make_unique<Mr>(*c, sc, bufs[k].data(), cap));
          }
          for (int it = 0; it < kIters; ++it) {
            std::vector<Pending> reqs(kDepth);
            for (int k = 0; k < kDepth; ++k) {
              fill_pattern(bufs[k].data(), size_of(t, it, k), pattern_seed(t * 1000 + it, k));
              reqs[k].what = "thread " + std::to_string(t) + " iter " + std::to_string(it) +
                             " send " + std::to_string(k);
              reqs[k].req = post_isend(*c, sc, bufs[k].data(), size_of(t, it, k), k, mrs[k]->get(),
                                       [&] { progress(*c, reqs); });
            }
            wait_all(*c, reqs);
          }
          mrs.clear();
          FT_OK(c->close_send(sc));
        });
        rk.peer->sync("done");
        FT_OK(c->finalize());
      });
  REQUIRE_RANKS(r);
}

TEST_CASE("connect and accept driven alternately from one thread in one process", "[loopback1]") {
  const int v = GENERATE(filter(abi_version_selected, range(6, 13)));
  INFO("ABI v" << v);
  auto r = run_one([&](Rank&) {
    auto c = open_plugin(v);
    const int dev = test_device(*c);
    // Two pairs, set up interleaved: connect(B) before accept(A) and so on.
    Handle ha, hb;
    void* la = do_listen(*c, dev, ha);
    void* lb = do_listen(*c, dev, hb);
    void *sa = nullptr, *sb = nullptr, *ra = nullptr, *rb = nullptr;
    while (!sa || !sb || !ra || !rb) {
      if (!sb) FT_OK(c->connect(dev, hb.bytes, &sb));
      if (!ra) FT_OK(c->accept(la, &ra));
      if (!sa) FT_OK(c->connect(dev, ha.bytes, &sa));
      if (!rb) FT_OK(c->accept(lb, &rb));
      FT_DEADLINE("connect/accept alternately from one thread");
    }
    FT_OK(c->close_listen(la));
    FT_OK(c->close_listen(lb));

    std::vector<size_t> sizes = {0, 1, 4095, 65536, 1u << 20};
    if (large_size(v) > (1u << 20)) sizes.push_back(large_size(v));
    const size_t cap = sizes.back() + 100;
    Buffer sbuf(cap), rbuf(cap);
    {
      Mr msa(*c, sa, sbuf.data(), cap), msb(*c, sb, sbuf.data(), cap);
      Mr mra(*c, ra, rbuf.data(), cap), mrb(*c, rb, rbuf.data(), cap);
      int idx = 0;
      for (size_t s : sizes) {
        for (int pair = 0; pair < 2; ++pair, ++idx) {
          void* sc = pair ? sb : sa;
          void* rc = pair ? rb : ra;
          void* smh = pair ? msb.get() : msa.get();
          void* rmh = pair ? mrb.get() : mra.get();
          const std::string what = "pair " + std::to_string(pair) + " size " + std::to_string(s);
          fill_pattern(sbuf.data(), s, pattern_seed(500, idx));
          rbuf.poison();
          std::vector<Pending> reqs(2);
          reqs[0].what = "send " + what;
          reqs[1].what = "receive " + what;
          // Send first (receiver not posted yet), driving nothing else on NULL:
          // the receive is posted from the retry hook, as NCCL's proxy would.
          reqs[0].req = post_isend(*c, sc, sbuf.data(), s, 1, smh, [&] {
            if (!reqs[1].req) reqs[1].req = post_irecv1(*c, rc, rbuf.data(), cap, 1, rmh);
            progress(*c, reqs);
          });
          if (!reqs[1].req) reqs[1].req = post_irecv1(*c, rc, rbuf.data(), cap, 1, rmh);
          wait_all(*c, reqs);
          FT_REQUIRE(reqs[1].sizes[0] == static_cast<int>(s),
                     what << ": received size " << reqs[1].sizes[0]);
          check_received(rbuf.data(), s, cap, pattern_seed(500, idx), what);
        }
      }
    }
    FT_OK(c->close_send(sa));
    FT_OK(c->close_send(sb));
    FT_OK(c->close_recv(ra));
    FT_OK(c->close_recv(rb));
    FT_OK(c->finalize());
  });
  REQUIRE_RANKS(r);
}
