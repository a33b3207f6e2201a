// Many comms at once, comms driven from several threads, and connect/accept
// driven alternately from one thread of one process.
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <cstdlib>
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

namespace {

// WEFT_TEST_LISTENS (default 4096): listens alive at once per rank.
int listens_wanted() {
  long n = 4096;
  if (const char* s = std::getenv("WEFT_TEST_LISTENS"); s && *s) n = std::strtol(s, nullptr, 10);
  return static_cast<int>(std::clamp<long>(n, 2, 1 << 20));
}

// The listeners a peer connects to: every 256th and the last.
std::vector<int> sampled(int listens) {
  std::vector<int> out;
  for (int i = 0; i < listens - 1; i += 256) out.push_back(i);
  out.push_back(listens - 1);
  return out;
}

}  // namespace

// NCCL's setup round: every listen first (each rank holds thousands when a
// round sets up alltoall connections over many channels), handles
// exchanged, then connects and accepts polled together in one loop, each
// listen closed after its accept. A listen that costs a provider receive of
// its own (the tagged protocol before the connect inbox) fails at the
// provider's receive-queue size (1.17's tcp;ofi_rxm 2,048, shm 1,024).
TEST_CASE("WEFT_TEST_LISTENS (4096) listens alive at once per rank, connected as NCCL does",
          "[listens]") {
  const int v = newest_selected_version();
  if (v == 0) return;
  INFO("ABI v" << v);
  auto body = [&](Rank& rk) {
    auto c = open_plugin(v);
    const int dev = test_device(*c);
    const int listens = listens_wanted();
    std::vector<Handle> own(static_cast<size_t>(listens)), peer(own.size());
    std::vector<void*> lcs(own.size());
    for (int i = 0; i < listens; ++i) lcs[i] = do_listen(*c, dev, own[i]);
    // Rank 0 sends first: the channel's buffer need not hold both.
    if (rk.id == 0) rk.peer->send_bytes(own.data(), sizeof(Handle) * own.size());
    rk.peer->recv_bytes(peer.data(), sizeof(Handle) * peer.size());
    if (rk.id == 1) rk.peer->send_bytes(own.data(), sizeof(Handle) * own.size());
    const std::vector<int> used = sampled(listens);
    const size_t n = used.size();
    std::vector<void*> scs(n, nullptr), rcs(n, nullptr);
    // Connects in reverse order, accepts in order: no pairing by timing.
    for (size_t left = 2 * n; left > 0;) {
      for (size_t k = 0; k < n; ++k) {
        if (!scs[n - 1 - k]) {
          FT_OK(c->connect(dev, peer[used[n - 1 - k]].bytes, &scs[n - 1 - k]));
          if (scs[n - 1 - k]) --left;
        }
        if (!rcs[k]) {
          FT_OK(c->accept(lcs[used[k]], &rcs[k]));
          if (rcs[k]) {
            FT_OK(c->close_listen(lcs[used[k]]));
            lcs[used[k]] = nullptr;
            --left;
          }
        }
      }
      FT_DEADLINE("connecting and accepting (" + std::to_string(left) + " of " +
                  std::to_string(2 * n) + " left, " + std::to_string(listens) + " listening)");
    }
    for (void*& lc : lcs) {
      if (lc) FT_OK(c->close_listen(lc));
      lc = nullptr;
    }
    auto size_of = [](size_t k) { return 65536 + 13 * k; };
    auto seed_of = [](int rank, size_t k) { return pattern_seed(rank * 7919 + 5, k); };
    std::vector<Buffer> out, in;
    std::vector<std::unique_ptr<Mr>> mrs;
    std::vector<Pending> reqs(2 * n);
    for (size_t k = 0; k < n; ++k) {
      out.emplace_back(size_of(k));
      in.emplace_back(size_of(k));
      fill_pattern(out[k].data(), size_of(k), seed_of(rk.id, k));
      in[k].poison();
    }
    for (size_t k = 0; k < n; ++k) {
      mrs.push_back(std::make_unique<Mr>(*c, rcs[k], in[k].data(), size_of(k)));
      reqs[k].what = "receive on the comm of listener " + std::to_string(used[k]);
      reqs[k].req = post_irecv1(*c, rcs[k], in[k].data(), size_of(k), 1, mrs.back()->get(),
                                [&] { progress(*c, reqs); });
    }
    for (size_t k = 0; k < n; ++k) {
      mrs.push_back(std::make_unique<Mr>(*c, scs[k], out[k].data(), size_of(k)));
      reqs[n + k].what = "send to the peer's listener " + std::to_string(used[k]);
      reqs[n + k].req = post_isend(*c, scs[k], out[k].data(), size_of(k), 1, mrs.back()->get(),
                                   [&] { progress(*c, reqs); });
    }
    wait_all(*c, reqs);
    for (size_t k = 0; k < n; ++k)
      check_received(in[k], reqs[k].sizes[0], size_of(k), size_of(k), seed_of(1 - rk.id, k),
                     reqs[k].what);
    rk.peer->sync("checked");
    mrs.clear();
    for (void* sc : scs) FT_OK(c->close_send(sc));
    for (void* rc : rcs) FT_OK(c->close_recv(rc));
    FT_OK(c->finalize());
  };
  auto r = run_two(body, body);
  REQUIRE_RANKS(r);
}
