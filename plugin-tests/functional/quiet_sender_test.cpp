// A send NCCL saw complete needs nothing more from its sender: NCCL stops
// calling test() once its requests are done, and the peer must still get
// every byte. A provider may keep an inject queued until a later call
// (libfabric's tcp queues it behind a send still leaving the socket, and
// the poll that completes that send can return with the inject still
// there), so weft's senders inject only where the provider hands it on at
// once. WEFT_OFI_TEST_HOLD_INJECTS makes every provider hold injects that
// way (held_injects.h): a large message and small ones behind it complete,
// the sender goes quiet, and the receiver must still get them all.
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "net_ops.h"
#include "pattern.h"
#include "two_rank.h"

using namespace weft;
using namespace weft::ft;

TEST_CASE("a sender that stops calling once its sends completed strands nothing",
          "[quiet_sender]") {
  const int v = GENERATE(filter(abi_version_selected, values({6, 12})));
  INFO("ABI v" << v);
  // The large one is written or sent with a completion; the small ones
  // follow while it is still in flight (eager, each with a size notice
  // where the provider reports no write lengths).
  constexpr int kCount = 4;
  const size_t sizes[kCount] = {size_t{1} << 20, 8, 64, 0};
  constexpr size_t kPosted = (size_t{1} << 20) + 4096;

  auto r = run_two(
      [&](Rank& rk) {  // receiver
        auto c = open_plugin(v);
        void* rc = recv_side_connect(*c, test_device(*c), *rk.peer);
        std::vector<Buffer> bufs;
        for (int k = 0; k < kCount; ++k) bufs.emplace_back(kPosted);
        {
          std::vector<std::unique_ptr<Mr>> mrs;
          std::vector<Pending> reqs(kCount);
          for (int k = 0; k < kCount; ++k) {
            bufs[k].poison();
            mrs.push_back(std::make_unique<Mr>(*c, rc, bufs[k].data(), kPosted));
            reqs[k].what = "receive of " + std::to_string(sizes[k]) + " bytes (tag " +
                           std::to_string(k + 1) + ") after the sender went quiet";
            reqs[k].req = post_irecv1(*c, rc, bufs[k].data(), kPosted, k + 1, mrs.back()->get());
          }
          rk.peer->send_str("posted");
          wait_all(*c, reqs);
          for (int k = 0; k < kCount; ++k) {
            check_received(bufs[k], reqs[k].sizes[0], sizes[k], kPosted, pattern_seed(37, k),
                           reqs[k].what);
          }
          rk.peer->sync("done");
        }
        FT_OK(c->close_recv(rc));
        FT_OK(c->finalize());
      },
      [&](Rank& rk) {  // sender
        auto c = open_plugin(v);
        void* sc = send_side_connect(*c, test_device(*c), *rk.peer);
        std::vector<Buffer> bufs;
        for (int k = 0; k < kCount; ++k) bufs.emplace_back(kPosted);
        {
          std::vector<std::unique_ptr<Mr>> mrs;
          std::vector<Pending> reqs(kCount);
          FT_REQUIRE(rk.peer->recv_str() == "posted", "out of step");
          for (int k = 0; k < kCount; ++k) {
            fill_pattern(bufs[k].data(), sizes[k], pattern_seed(37, k));
            mrs.push_back(std::make_unique<Mr>(*c, sc, bufs[k].data(), kPosted));
            reqs[k].what = "send of " + std::to_string(sizes[k]) + " bytes";
            reqs[k].req = post_isend(*c, sc, bufs[k].data(), sizes[k], k + 1, mrs.back()->get(),
                                     [&] { progress(*c, reqs); });
          }
          wait_all(*c, reqs);
          // Quiet from here on: no plugin call until the receiver has it all.
          rk.peer->sync("done");
        }
        FT_OK(c->close_send(sc));
        FT_OK(c->finalize());
      });
  REQUIRE_RANKS(r);
}
