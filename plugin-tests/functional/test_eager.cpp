// The libfabric transport's promise about small messages: a send up to the
// provider's inject size completes without the receiver's help, before the
// receiver has even posted its receive (the rdma protocol sends it eagerly,
// and its clear-to-send, which comes later, does not hold it up); once the
// receive is posted, every byte lands in the slot its tag names. NCCL does
// not need this, and the native verbs transport's sends wait for the
// clear-to-send, so only the libfabric flavours run it (functional.*.eager),
// udp's excepted: rxd completes a send when the receiver acknowledged it.
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "net_ops.h"
#include "pattern.h"
#include "two_rank.h"

using namespace weft;
using namespace weft::ft;

TEST_CASE("small sends complete before their receive is posted; bytes land once it is", "[eager]") {
  const int v = GENERATE(filter(abi_version_selected, values({6, 12})));
  INFO("ABI v" << v);
  // Message k goes with tag kTags[k]; the receiver groups them in another order.
  constexpr int kCount = 3;
  const size_t sizes[kCount] = {8, 0, 64};
  const int tags[kCount] = {1, 2, -3};
  const int recv_order[kCount] = {2, 0, 1};  // group entry e takes message recv_order[e]
  constexpr size_t kPosted = 128;

  auto r = run_two(
      [&](Rank& rk) {  // receiver: posts only after every send completed
        auto c = open_plugin(v);
        void* rc = recv_side_connect(*c, test_device(*c), *rk.peer);
        std::vector<Buffer> bufs;
        for (int e = 0; e < kCount; ++e) bufs.emplace_back(kPosted);
        {
          std::vector<std::unique_ptr<Mr>> mrs;
          void* data[kCount];
          size_t posted[kCount];
          int entry_tags[kCount];
          void* mhs[kCount];
          for (int e = 0; e < kCount; ++e) {
            bufs[e].poison();
            mrs.push_back(std::make_unique<Mr>(*c, rc, bufs[e].data(), kPosted));
            data[e] = bufs[e].data();
            posted[e] = kPosted;
            entry_tags[e] = tags[recv_order[e]];
            mhs[e] = mrs.back()->get();
          }
          rk.peer->send_str("ready");
          // No plugin call until the sender's requests are done.
          FT_REQUIRE(rk.peer->recv_str() == "sent", "out of step");
          void* req = post_irecv(*c, rc, kCount, data, posted, entry_tags, mhs);
          int got[8] = {-1, -1, -1, -1, -1, -1, -1, -1};
          wait_ok(*c, req, "grouped receive of the early messages", got);
          for (int e = 0; e < kCount; ++e) {
            const int k = recv_order[e];
            const std::string what =
                "entry " + std::to_string(e) + " (tag " + std::to_string(tags[k]) + ")";
            check_received(bufs[e], got[e], sizes[k], kPosted, pattern_seed(31, k), what);
          }
        }
        rk.peer->sync("done");
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
          FT_REQUIRE(rk.peer->recv_str() == "ready", "out of step");
          for (int k = 0; k < kCount; ++k) {
            fill_pattern(bufs[k].data(), sizes[k], pattern_seed(31, k));
            mrs.push_back(std::make_unique<Mr>(*c, sc, bufs[k].data(), kPosted));
            reqs[k].what = "send of " + std::to_string(sizes[k]) + " bytes with tag " +
                           std::to_string(tags[k]) + " before its receive was posted";
            reqs[k].req = post_isend(*c, sc, bufs[k].data(), sizes[k], tags[k], mrs.back()->get());
          }
          // The receiver is not calling the plugin: these complete on their own.
          wait_all(*c, reqs);
          for (int k = 0; k < kCount; ++k) {
            FT_REQUIRE(reqs[k].sizes[0] == static_cast<int>(sizes[k]),
                       reqs[k].what << ": test() size " << reqs[k].sizes[0]);
          }
          rk.peer->send_str("sent");
          rk.peer->sync("done");
        }
        FT_OK(c->close_send(sc));
        FT_OK(c->finalize());
      });
  REQUIRE_RANKS(r);
}
