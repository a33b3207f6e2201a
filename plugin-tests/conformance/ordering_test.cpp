// Matching is in posting order per comm: many messages with the same tag and
// distinct contents and sizes (zero-byte ones included) land in the receives
// in the order both sides posted them, and test() reports each real size.
#include <catch2/catch.hpp>

#include "net_ops.h"
#include "pattern.h"
#include "two_rank.h"

using namespace weft;
using namespace weft::ft;

namespace {

constexpr int kInFlight = NCCL_NET_MAX_REQUESTS;
constexpr int kOrderRounds = 4;
constexpr size_t kPosted = 9000;  // every receive; sends are smaller or equal

// Distinct sizes per message so a swap shows in the sizes too.
size_t size_of(int round, int i) {
  if (i % 7 == 2) return 0;
  return static_cast<size_t>((i * 263 + round * 17) % kPosted) + 1;
}

uint64_t seed_of(int round, int i) {
  return pattern_seed(9100 + round, i);
}

}  // namespace

TEST_CASE("same-tag messages arrive in posting order with their real sizes", "[order]") {
  const int v = GENERATE(filter(abi_version_selected, range(6, 13)));
  INFO("ABI v" << v);
  auto r = run_two(
      [&](Rank& rk) {  // receiver: posts a full window, then waits for all
        auto c = open_plugin(v);
        void* rc = recv_side_connect(*c, test_device(*c), *rk.peer);
        std::vector<Buffer> bufs;
        std::vector<std::unique_ptr<Mr>> mrs;
        for (int i = 0; i < kInFlight; ++i) {
          bufs.emplace_back(kPosted);
          mrs.push_back(std::make_unique<Mr>(*c, rc, bufs.back().data(), kPosted));
        }
        for (int round = 0; round < kOrderRounds; ++round) {
          std::vector<Pending> reqs(kInFlight);
          for (int i = 0; i < kInFlight; ++i) {
            bufs[i].poison();
            reqs[i].req = post_irecv1(*c, rc, bufs[i].data(), kPosted, 0, mrs[i]->get());
            reqs[i].what = "receive #" + std::to_string(i) + " of round " + std::to_string(round);
          }
          rk.peer->send_u64(static_cast<uint64_t>(round));  // odd rounds: sender waits for this
          wait_all(*c, reqs);
          for (int i = 0; i < kInFlight; ++i) {
            const size_t s = size_of(round, i);
            FT_REQUIRE(reqs[i].sizes[0] == static_cast<int>(s),
                       reqs[i].what << ": test() reported size " << reqs[i].sizes[0]
                                    << ", message #" << i << " has " << s << " bytes (posted "
                                    << kPosted << "): wrong size or out of order");
            check_received(bufs[i].data(), s, kPosted, seed_of(round, i),
                           reqs[i].what + " (not message #" + std::to_string(i) +
                               "'s contents: out of order)");
          }
          rk.peer->sync("round");
        }
        mrs.clear();
        FT_OK(c->close_recv(rc));
        FT_OK(c->finalize());
      },
      [&](Rank& rk) {  // sender: a full window back to back, same tag
        auto c = open_plugin(v);
        void* sc = send_side_connect(*c, test_device(*c), *rk.peer);
        std::vector<Buffer> bufs;
        std::vector<std::unique_ptr<Mr>> mrs;
        for (int i = 0; i < kInFlight; ++i) {
          bufs.emplace_back(kPosted);
          mrs.push_back(std::make_unique<Mr>(*c, sc, bufs.back().data(), kPosted));
        }
        for (int round = 0; round < kOrderRounds; ++round) {
          for (int i = 0; i < kInFlight; ++i)
            fill_pattern(bufs[i].data(), size_of(round, i), seed_of(round, i));
          // Even rounds: sends may reach the receiver before its receives.
          if (round % 2) rk.peer->recv_u64();
          std::vector<Pending> reqs(kInFlight);
          for (int i = 0; i < kInFlight; ++i) {
            reqs[i].what = "send #" + std::to_string(i) + " of round " + std::to_string(round);
            reqs[i].req = post_isend(*c, sc, bufs[i].data(), size_of(round, i), 0, mrs[i]->get(),
                                     [&] { progress(*c, reqs); });
          }
          wait_all(*c, reqs);
          if (round % 2 == 0) rk.peer->recv_u64();
          rk.peer->sync("round");
        }
        mrs.clear();
        FT_OK(c->close_send(sc));
        FT_OK(c->finalize());
      });
  REQUIRE_RANKS(r);
}
