// Two processes move verified bytes through the ABI: message sizes, receives
// posted larger than the send, 32 requests in flight, grouped receives.
#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <memory>
#include <numeric>
#include <random>
#include <thread>

#include "net_ops.h"
#include "pattern.h"
#include "two_rank.h"

using namespace weft;
using namespace weft::ft;

namespace {

std::vector<size_t> message_sizes(int v) {
  std::vector<size_t> s = {0, 1, 4095, 65536, 1u << 20};
  if (large_size(v) > (1u << 20)) s.push_back(large_size(v));
  return s;
}

}  // namespace

TEST_CASE("sizes 0..64MiB arrive intact; receives posted larger report the real size", "[xfer]") {
  const int v = GENERATE(filter(abi_version_selected, range(6, 13)));
  INFO("ABI v" << v);
  const auto sizes = message_sizes(v);
  const size_t extra = 4096 + 1;  // "posted larger" adds this
  const size_t cap = sizes.back() + extra;

  auto r = run_two(
      [&](Rank& rk) {  // receiver
        auto c = open_plugin(v);
        void* rc = recv_side_connect(*c, test_device(*c), *rk.peer);
        Buffer buf(cap);
        {
          Mr mr(*c, rc, buf.data(), buf.size());
          for (size_t i = 0; i < sizes.size(); ++i) {
            for (int larger = 0; larger < 2; ++larger) {
              const size_t s = sizes[i];
              const size_t posted = larger ? s + extra : s;
              const std::string what =
                  "receive of " + std::to_string(s) + " bytes posted as " + std::to_string(posted);
              buf.poison();
              void* req = post_irecv1(*c, rc, buf.data(), posted, 7, mr.get());
              rk.peer->send_u64(i * 2 + larger);  // receive posted
              int got = wait_ok(*c, req, what);
              check_received(buf, got, s, posted, pattern_seed(1000 + i, larger), what);
            }
          }
          rk.peer->sync("done");
        }
        FT_OK(c->close_recv(rc));
        FT_OK(c->finalize());
      },
      [&](Rank& rk) {  // sender
        auto c = open_plugin(v);
        void* sc = send_side_connect(*c, test_device(*c), *rk.peer);
        Buffer buf(cap);
        {
          Mr mr(*c, sc, buf.data(), buf.size());
          for (size_t i = 0; i < sizes.size(); ++i) {
            for (int larger = 0; larger < 2; ++larger) {
              const size_t s = sizes[i];
              fill_pattern(buf.data(), s, pattern_seed(1000 + i, larger));
              // Alternate: send before / after the peer posted its receive.
              if (larger) FT_REQUIRE(rk.peer->recv_u64() == i * 2 + larger, "out of step");
              void* req = post_isend(*c, sc, buf.data(), s, 7, mr.get());
              int got = wait_ok(*c, req, "send of " + std::to_string(s) + " bytes");
              FT_REQUIRE(got == static_cast<int>(s),
                         "send of " << s << ": test() reported size " << got);
              if (!larger) FT_REQUIRE(rk.peer->recv_u64() == i * 2 + larger, "out of step");
            }
          }
          rk.peer->sync("done");
        }
        FT_OK(c->close_send(sc));
        FT_OK(c->finalize());
      });
  REQUIRE_RANKS(r);
}

// NCCL stops calling test() once its requests are done: a send reported
// done must be on its way without another call into the plugin. A small
// message right behind a large one meets a full socket on tcp, where
// libfabric would copy it into a staging buffer of its own, report it sent,
// and pass it to the kernel only at the next call (provider_quirks.h).
TEST_CASE("a message reported sent arrives while the sender calls nothing more", "[xfer]") {
  // The transport's promise, not the ABI's: the newest version selected.
  const int v = newest_selected_version();
  REQUIRE(v != 0);
  INFO("ABI v" << v);
  constexpr int kRounds = 6;
  constexpr size_t kSmall = 24;
  const size_t big_size = large_size(v);
  const auto quiet_sender = [](int round) {
    return "round " + std::to_string(round) +
           ": the sender saw both sends done and has called nothing since";
  };

  auto r = run_two(
      [&](Rank& rk) {  // receiver
        auto c = open_plugin(v);
        void* rc = recv_side_connect(*c, test_device(*c), *rk.peer);
        Buffer big(big_size);
        Buffer small(kSmall);
        {
          Mr big_mr(*c, rc, big.data(), big.size());
          Mr small_mr(*c, rc, small.data(), small.size());
          for (int round = 0; round < kRounds; ++round) {
            big.poison();
            small.poison();
            void* big_req = post_irecv1(*c, rc, big.data(), big_size, 7, big_mr.get());
            void* small_req = post_irecv1(*c, rc, small.data(), kSmall, 7, small_mr.get());
            rk.peer->send_u64(static_cast<uint64_t>(round));  // receives posted
            // Not reading lets the large message fill the socket.
            std::this_thread::sleep_for(std::chrono::milliseconds(100));
            const std::string what = quiet_sender(round);
            int got = wait_ok(*c, big_req, "large receive, " + what);
            check_received(big, got, big_size, big_size, pattern_seed(2000 + round, 0), what);
            got = wait_ok(*c, small_req, "small receive right behind it, " + what);
            check_received(small, got, kSmall, kSmall, pattern_seed(2000 + round, 1), what);
            rk.peer->send_u64(static_cast<uint64_t>(round));  // both arrived
          }
        }
        FT_OK(c->close_recv(rc));
        FT_OK(c->finalize());
      },
      [&](Rank& rk) {  // sender
        auto c = open_plugin(v);
        void* sc = send_side_connect(*c, test_device(*c), *rk.peer);
        Buffer big(big_size);
        Buffer small(kSmall);
        {
          Mr big_mr(*c, sc, big.data(), big.size());
          Mr small_mr(*c, sc, small.data(), small.size());
          for (int round = 0; round < kRounds; ++round) {
            fill_pattern(big.data(), big_size, pattern_seed(2000 + round, 0));
            fill_pattern(small.data(), kSmall, pattern_seed(2000 + round, 1));
            FT_REQUIRE(rk.peer->recv_u64() == static_cast<uint64_t>(round), "out of step");
            std::vector<Pending> sends(1);
            sends[0].req = post_isend(*c, sc, big.data(), big_size, 7, big_mr.get());
            sends[0].what = "large send";
            Pending small_send;
            small_send.req = post_isend(*c, sc, small.data(), kSmall, 7, small_mr.get(),
                                        [&] { progress(*c, sends); });
            small_send.what = "small send";
            sends.push_back(small_send);
            wait_all(*c, sends);
            // Quiet until the receiver has both: only the provider's own
            // progress, or none, moves them now.
            FT_REQUIRE(rk.peer->recv_u64() == static_cast<uint64_t>(round), "out of step");
          }
        }
        FT_OK(c->close_send(sc));
        FT_OK(c->finalize());
      });
  REQUIRE_RANKS(r);
}

TEST_CASE("32 requests in flight per comm, in posting order", "[inflight]") {
  const int v = GENERATE(filter(abi_version_selected, range(6, 13)));
  INFO("ABI v" << v);
  constexpr int kN = NCCL_NET_MAX_REQUESTS;
  auto size_of = [](int round, int i) -> size_t {
    if (i == 5) return 0;
    if (i % 8 == 3) return (256u << 10) + static_cast<size_t>(i + round);
    return 4096 + static_cast<size_t>(17 * i + round);
  };
  const int rounds = 3;

  auto r = run_two(
      [&](Rank& rk) {  // receiver: posts all 32 before testing any
        auto c = open_plugin(v);
        void* rc = recv_side_connect(*c, test_device(*c), *rk.peer);
        std::vector<Buffer> bufs;
        std::vector<std::unique_ptr<Mr>> mrs;
        for (int i = 0; i < kN; ++i) {
          bufs.emplace_back((256u << 10) + 64);
          mrs.push_back(std::make_unique<Mr>(*c, rc, bufs.back().data(), bufs.back().size()));
        }
        for (int round = 0; round < rounds; ++round) {
          std::vector<Pending> reqs(kN);
          for (int i = 0; i < kN; ++i) {
            bufs[i].poison();
            // Retry on NULL by calling irecv again only: with fewer than 32
            // outstanding the plugin must find the resources.
            reqs[i].req = post_irecv1(*c, rc, bufs[i].data(), bufs[i].size(), i, mrs[i]->get());
            reqs[i].what = "irecv #" + std::to_string(i) + " round " + std::to_string(round);
          }
          rk.peer->send_u64(static_cast<uint64_t>(round));
          wait_all(*c, reqs);
          for (int i = 0; i < kN; ++i) {
            const size_t s = size_of(round, i);
            check_received(bufs[i], reqs[i].sizes[0], s, bufs[i].size(), pattern_seed(round, i),
                           reqs[i].what);
          }
          rk.peer->sync("round");
        }
        mrs.clear();
        FT_OK(c->close_recv(rc));
        FT_OK(c->finalize());
      },
      [&](Rank& rk) {  // sender: 32 isends, then test all
        auto c = open_plugin(v);
        void* sc = send_side_connect(*c, test_device(*c), *rk.peer);
        std::vector<Buffer> bufs;
        std::vector<std::unique_ptr<Mr>> mrs;
        for (int i = 0; i < kN; ++i) {
          bufs.emplace_back((256u << 10) + 64);
          mrs.push_back(std::make_unique<Mr>(*c, sc, bufs.back().data(), bufs.back().size()));
        }
        for (int round = 0; round < rounds; ++round) {
          std::vector<Pending> reqs(kN);
          for (int i = 0; i < kN; ++i)
            fill_pattern(bufs[i].data(), size_of(round, i), pattern_seed(round, i));
          if (round == 1) rk.peer->recv_u64();  // round 1: receiver posted first
          for (int i = 0; i < kN; ++i) {
            reqs[i].what = "isend #" + std::to_string(i) + " round " + std::to_string(round);
            // On NULL, drive the already posted sends (as NCCL's proxy does);
            // progress() skips the entries not posted yet.
            reqs[i].req = post_isend(*c, sc, bufs[i].data(), size_of(round, i), i, mrs[i]->get(),
                                     [&] { progress(*c, reqs); });
          }
          wait_all(*c, reqs);
          for (int i = 0; i < kN; ++i)
            FT_REQUIRE(reqs[i].sizes[0] == static_cast<int>(size_of(round, i)),
                       reqs[i].what << ": test() size " << reqs[i].sizes[0]);
          if (round != 1) rk.peer->recv_u64();
          rk.peer->sync("round");
        }
        mrs.clear();
        FT_OK(c->close_send(sc));
        FT_OK(c->finalize());
      });
  REQUIRE_RANKS(r);
}

// n = 1..min(8, maxRecvs): NCCL never groups more than 8, nor more than the
// plugin's maxRecvs.
TEST_CASE("grouped receives n=1..maxRecvs: shuffled tagged sends land in their slots",
          "[grouped]") {
  const int v = GENERATE(filter(abi_version_selected, range(6, 13)));
  INFO("ABI v" << v);
  struct Group {
    int n;
    std::vector<int> tags;
    std::vector<size_t> sizes;   // actual message size per slot
    std::vector<size_t> posted;  // posted size per slot (>= actual)
    std::vector<int> order;      // slot order the sender uses
  };
  std::vector<Group> groups;
  for (int rep = 0; rep < 2; ++rep) {
    for (int n = 1; n <= 8; ++n) {
      Group g;
      g.n = n;
      std::mt19937 rng(static_cast<unsigned>(n * 131 + rep));
      std::vector<int> perm(n);
      std::iota(perm.begin(), perm.end(), 0);
      std::shuffle(perm.begin(), perm.end(), rng);
      for (int k = 0; k < n; ++k) {
        g.tags.push_back(1000 + 37 * perm[k] + 100 * rep + n);  // distinct, not sorted
        size_t s = (k == 1 && n >= 3) ? 0 : static_cast<size_t>(1000 * (k + 1) + n);
        if (n == 8 && k == 6) s = (1u << 20) + 5;
        g.sizes.push_back(s);
        g.posted.push_back(s + (k % 2 ? 512 : 0));
      }
      g.order.resize(n);
      std::iota(g.order.begin(), g.order.end(), 0);
      std::shuffle(g.order.begin(), g.order.end(), rng);
      if (std::is_sorted(g.order.begin(), g.order.end()))
        std::reverse(g.order.begin(), g.order.end());
      groups.push_back(g);
    }
  }
  auto seed_of = [](size_t gi, int tag) {
    return pattern_seed(7000 + gi, static_cast<uint64_t>(tag));
  };
  // Both ranks read the same limit from the properties.
  auto max_group = [](NetClient& c) {
    NetDeviceInfo info;
    FT_OK(c.properties(test_device(c), &info));
    FT_REQUIRE(info.max_recvs >= 1, "maxRecvs " << info.max_recvs);
    return std::min(8, info.max_recvs);
  };

  auto r = run_two(
      [&](Rank& rk) {  // receiver
        auto c = open_plugin(v);
        const int max_n = max_group(*c);
        void* rc = recv_side_connect(*c, test_device(*c), *rk.peer);
        for (size_t gi = 0; gi < groups.size(); ++gi) {
          const Group& g = groups[gi];
          if (g.n > max_n) continue;
          std::vector<Buffer> bufs;
          std::vector<std::unique_ptr<Mr>> mrs;
          std::vector<void*> data, mhs;
          std::vector<size_t> posted = g.posted;
          std::vector<int> tags = g.tags;
          for (int k = 0; k < g.n; ++k) {
            bufs.emplace_back(g.posted[k]);
            mrs.push_back(
                std::make_unique<Mr>(*c, rc, bufs.back().data(), std::max<size_t>(1, g.posted[k])));
          }
          for (int k = 0; k < g.n; ++k) {
            data.push_back(bufs[k].data());
            mhs.push_back(mrs[k]->get());
          }
          for (int a = 0; a < g.n; ++a)
            for (int b = a + 1; b < g.n; ++b)
              FT_REQUIRE(tags[a] != tags[b], "test bug: duplicate tags");
          void* req = post_irecv(*c, rc, g.n, data.data(), posted.data(), tags.data(), mhs.data());
          rk.peer->send_u64(gi);
          int got[8] = {-1, -1, -1, -1, -1, -1, -1, -1};
          const std::string what =
              "grouped irecv n=" + std::to_string(g.n) + " #" + std::to_string(gi);
          wait_ok(*c, req, what, got);
          for (int k = 0; k < g.n; ++k) {
            const std::string slot =
                what + " slot " + std::to_string(k) + " tag " + std::to_string(g.tags[k]);
            check_received(bufs[k], got[k], g.sizes[k], g.posted[k], seed_of(gi, g.tags[k]), slot);
          }
          mrs.clear();
        }
        rk.peer->sync("done");
        FT_OK(c->close_recv(rc));
        FT_OK(c->finalize());
      },
      [&](Rank& rk) {  // sender
        auto c = open_plugin(v);
        const int max_n = max_group(*c);
        void* sc = send_side_connect(*c, test_device(*c), *rk.peer);
        for (size_t gi = 0; gi < groups.size(); ++gi) {
          const Group& g = groups[gi];
          if (g.n > max_n) continue;
          std::vector<Buffer> bufs;
          std::vector<std::unique_ptr<Mr>> mrs;
          for (int k = 0; k < g.n; ++k) {
            bufs.emplace_back(g.sizes[k]);
            fill_pattern(bufs.back().data(), g.sizes[k], seed_of(gi, g.tags[k]));
            mrs.push_back(
                std::make_unique<Mr>(*c, sc, bufs.back().data(), std::max<size_t>(1, g.sizes[k])));
          }
          if (gi % 2) rk.peer->recv_u64();  // odd groups: receiver posted first
          std::vector<Pending> reqs;
          for (int j = 0; j < g.n; ++j) {
            int k = g.order[j];
            Pending p;
            p.what = "send tag " + std::to_string(g.tags[k]) + " of group " + std::to_string(gi);
            p.req = post_isend(*c, sc, bufs[k].data(), g.sizes[k], g.tags[k], mrs[k]->get(),
                               [&] { progress(*c, reqs); });
            reqs.push_back(p);
          }
          wait_all(*c, reqs);
          if (gi % 2 == 0) rk.peer->recv_u64();
          mrs.clear();
        }
        rk.peer->sync("done");
        FT_OK(c->close_send(sc));
        FT_OK(c->finalize());
      });
  REQUIRE_RANKS(r);
}

// NCCL's most on one comm: 32 receives of maxRecvs buffers each, so up to
// 256 sends in flight, small enough to go eagerly. In round 0 the sends get
// ahead of their receives (the receiver waits a moment before posting);
// in round 1 the receives go first.
TEST_CASE("32 grouped receives of maxRecvs in flight: 256 sends land in their slots",
          "[inflight]") {
  const int v = GENERATE(filter(abi_version_selected, range(6, 13)));
  INFO("ABI v" << v);
  constexpr int kGroups = NCCL_NET_MAX_REQUESTS;
  constexpr size_t kSlot = 512;
  auto group_size = [](NetClient& c) {
    NetDeviceInfo info;
    FT_OK(c.properties(test_device(c), &info));
    return std::clamp(info.max_recvs, 1, 8);
  };
  auto size_of = [](int round, int g, int k) -> size_t {
    if (g == 7 && k == 0) return 0;
    return static_cast<size_t>(64 + 13 * k + 5 * g + round);
  };
  auto seed_of = [](int round, int g, int k) {
    return pattern_seed(9100 + round, static_cast<uint64_t>(g * 8 + k));
  };

  auto r = run_two(
      [&](Rank& rk) {  // receiver
        auto c = open_plugin(v);
        const int n = group_size(*c);
        void* rc = recv_side_connect(*c, test_device(*c), *rk.peer);
        Buffer buf(kGroups * 8 * kSlot);
        auto mr = std::make_unique<Mr>(*c, rc, buf.data(), buf.size());
        for (int round = 0; round < 2; ++round) {
          buf.poison();
          if (round == 0) std::this_thread::sleep_for(std::chrono::milliseconds(200));
          std::vector<Pending> reqs(kGroups);
          for (int g = 0; g < kGroups; ++g) {
            void* data[8];
            size_t sizes[8];
            int tags[8];
            void* mhs[8];
            for (int k = 0; k < n; ++k) {
              data[k] = buf.data() + (g * 8 + k) * kSlot;
              sizes[k] = kSlot;
              tags[k] = k;
              mhs[k] = mr->get();
            }
            reqs[g].what = "round " + std::to_string(round) + " group " + std::to_string(g);
            reqs[g].req =
                post_irecv(*c, rc, n, data, sizes, tags, mhs, [&] { progress(*c, reqs); });
          }
          if (round == 1) rk.peer->send_u64(1);  // the receives are posted
          wait_all(*c, reqs);
          for (int g = 0; g < kGroups; ++g) {
            for (int k = 0; k < n; ++k) {
              const size_t sent = size_of(round, g, k);
              FT_REQUIRE(reqs[g].sizes[k] == static_cast<int>(sent),
                         reqs[g].what << " slot " << k << ": size " << reqs[g].sizes[k] << ", sent "
                                      << sent);
              check_received(buf.data() + (g * 8 + k) * kSlot, sent, kSlot, seed_of(round, g, k),
                             reqs[g].what + " slot " + std::to_string(k));
            }
          }
          rk.peer->sync("round");
        }
        mr.reset();  // deregistered before its comm closes
        FT_OK(c->close_recv(rc));
        FT_OK(c->finalize());
      },
      [&](Rank& rk) {  // sender
        auto c = open_plugin(v);
        const int n = group_size(*c);
        void* sc = send_side_connect(*c, test_device(*c), *rk.peer);
        Buffer buf(kGroups * 8 * kSlot);
        auto mr = std::make_unique<Mr>(*c, sc, buf.data(), buf.size());
        for (int round = 0; round < 2; ++round) {
          for (int g = 0; g < kGroups; ++g)
            for (int k = 0; k < n; ++k)
              fill_pattern(buf.data() + (g * 8 + k) * kSlot, size_of(round, g, k),
                           seed_of(round, g, k));
          if (round == 1) rk.peer->recv_u64();
          std::vector<Pending> reqs(static_cast<size_t>(kGroups * n));
          for (int g = 0; g < kGroups; ++g) {
            for (int k = 0; k < n; ++k) {
              Pending& p = reqs[static_cast<size_t>(g * n + k)];
              p.what = "round " + std::to_string(round) + " send " + std::to_string(g) + "." +
                       std::to_string(k);
              p.req = post_isend(*c, sc, buf.data() + (g * 8 + k) * kSlot, size_of(round, g, k), k,
                                 mr->get(), [&] { progress(*c, reqs); });
            }
          }
          wait_all(*c, reqs);
          rk.peer->sync("round");
        }
        mr.reset();
        FT_OK(c->close_send(sc));
        FT_OK(c->finalize());
      });
  REQUIRE_RANKS(r);
}

// A send that waits seconds for its receive (the receiver is computing):
// weft's rdma protocol probes rail 0 after a second's wait and again after
// longer ones; the receiver must drop the probes, and the message still
// lands intact. (A receiver that took a probe for a message fails here.)
TEST_CASE("a send that waits 3.5 s for its receive lands intact", "[inflight]") {
  int v = 12;
  while (v > 6 && !abi_version_selected(v)) --v;
  INFO("ABI v" << v);
  constexpr size_t kSize = (1u << 20) + 3;  // past every eager size: it waits
  const uint64_t seed = pattern_seed(9300, 1);

  auto r = run_two(
      [&](Rank& rk) {  // receiver
        auto c = open_plugin(v);
        void* rc = recv_side_connect(*c, test_device(*c), *rk.peer);
        Buffer buf(kSize);
        {
          Mr mr(*c, rc, buf.data(), buf.size());
          rk.peer->recv_u64();  // the sender is posting
          std::this_thread::sleep_for(std::chrono::milliseconds(3500));
          buf.poison();
          void* req = post_irecv1(*c, rc, buf.data(), kSize, 5, mr.get());
          const int got = wait_ok(*c, req, "the late receive");
          FT_REQUIRE(got == static_cast<int>(kSize), "received " << got << " of " << kSize);
          check_received(buf.data(), kSize, kSize, seed, "the late receive");
          rk.peer->sync("done");
        }
        FT_OK(c->close_recv(rc));
        FT_OK(c->finalize());
      },
      [&](Rank& rk) {  // sender
        auto c = open_plugin(v);
        void* sc = send_side_connect(*c, test_device(*c), *rk.peer);
        Buffer buf(kSize);
        fill_pattern(buf.data(), kSize, seed);
        {
          Mr mr(*c, sc, buf.data(), buf.size());
          rk.peer->send_u64(1);
          void* req = post_isend(*c, sc, buf.data(), kSize, 5, mr.get());
          wait_ok(*c, req, "the send that waited");
          rk.peer->sync("done");
        }
        FT_OK(c->close_send(sc));
        FT_OK(c->finalize());
      });
  REQUIRE_RANKS(r);
}

// The receiver skips the clear-to-sends of groups that eager messages
// filled; a later clear-to-send speaks for them. Here the sender, idle,
// finds 30 skipped groups and then 32 clear-to-sends at once when its
// first large send asks for one: its bookkeeping jumps 30 groups while
// that send waits, and the group 32 after the first skipped one reuses
// its place. The send must go to its own receive (weft once wrote it
// into that later group's buffer and then waited forever).
TEST_CASE("a large send after a run of eager ones, 32 receives already posted, lands in its own",
          "[inflight]") {
  int v = 12;
  while (v > 6 && !abi_version_selected(v)) --v;
  INFO("ABI v" << v);
  constexpr int kEager = 30;
  constexpr size_t kEagerSize = 4096;
  constexpr int kLarge = NCCL_NET_MAX_REQUESTS;
  auto large_size = [](int i) { return (size_t{64} << 10) + static_cast<size_t>(i); };

  auto r = run_two(
      [&](Rank& rk) {  // receiver
        auto c = open_plugin(v);
        void* rc = recv_side_connect(*c, test_device(*c), *rk.peer);
        {
          Buffer small(kEagerSize);
          Mr small_mr(*c, rc, small.data(), small.size());
          for (int i = 0; i < kEager; ++i) {
            small.poison();
            void* req = post_irecv1(*c, rc, small.data(), kEagerSize, 1, small_mr.get());
            const int got = wait_ok(*c, req, "eager receive #" + std::to_string(i));
            check_received(small.data(), static_cast<size_t>(got), kEagerSize,
                           pattern_seed(9400, static_cast<uint64_t>(i)), "eager receive");
          }
          std::vector<Buffer> bufs;
          std::vector<std::unique_ptr<Mr>> mrs;
          std::vector<Pending> reqs(kLarge);
          for (int i = 0; i < kLarge; ++i) {
            bufs.emplace_back(large_size(i));
            mrs.push_back(std::make_unique<Mr>(*c, rc, bufs.back().data(), bufs.back().size()));
          }
          for (int i = 0; i < kLarge; ++i) {
            bufs[i].poison();
            reqs[i].req = post_irecv1(*c, rc, bufs[i].data(), bufs[i].size(), 2, mrs[i]->get());
            reqs[i].what = "large receive #" + std::to_string(i);
          }
          rk.peer->send_u64(1);  // all posted: their clear-to-sends are on the way
          wait_all(*c, reqs);
          for (int i = 0; i < kLarge; ++i) {
            check_received(bufs[i], reqs[i].sizes[0], large_size(i), large_size(i),
                           pattern_seed(9401, static_cast<uint64_t>(i)), reqs[i].what);
          }
          mrs.clear();
          rk.peer->sync("done");
        }
        FT_OK(c->close_recv(rc));
        FT_OK(c->finalize());
      },
      [&](Rank& rk) {  // sender
        auto c = open_plugin(v);
        void* sc = send_side_connect(*c, test_device(*c), *rk.peer);
        {
          Buffer small(kEagerSize);
          Mr small_mr(*c, sc, small.data(), small.size());
          for (int i = 0; i < kEager; ++i) {
            fill_pattern(small.data(), kEagerSize, pattern_seed(9400, static_cast<uint64_t>(i)));
            void* req = post_isend(*c, sc, small.data(), kEagerSize, 1, small_mr.get());
            wait_ok(*c, req, "eager send #" + std::to_string(i));
          }
          std::vector<Buffer> bufs;
          std::vector<std::unique_ptr<Mr>> mrs;
          std::vector<Pending> reqs(kLarge);
          for (int i = 0; i < kLarge; ++i) {
            bufs.emplace_back(large_size(i));
            fill_pattern(bufs.back().data(), large_size(i),
                         pattern_seed(9401, static_cast<uint64_t>(i)));
            mrs.push_back(std::make_unique<Mr>(*c, sc, bufs.back().data(), bufs.back().size()));
          }
          rk.peer->recv_u64();  // no call into the plugin until every receive is posted
          for (int i = 0; i < kLarge; ++i) {
            reqs[i].what = "large send #" + std::to_string(i);
            reqs[i].req = post_isend(*c, sc, bufs[i].data(), large_size(i), 2, mrs[i]->get(),
                                     [&] { progress(*c, reqs); });
          }
          wait_all(*c, reqs);
          mrs.clear();
          rk.peer->sync("done");
        }
        FT_OK(c->close_send(sc));
        FT_OK(c->finalize());
      });
  REQUIRE_RANKS(r);
}
