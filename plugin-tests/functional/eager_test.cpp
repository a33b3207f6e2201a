// The libfabric transport's promise about small messages: a send up to the
// provider's inject size completes without the receiver's help, before the
// receiver has even posted its receive (the rdma protocol sends it eagerly,
// and its clear-to-send, which comes later, does not hold it up); once the
// receive is posted, every byte lands in the slot its tag names. NCCL does
// not need this, and the native verbs transport's sends wait for the
// clear-to-send, so only the libfabric flavours run it (functional.*.eager),
// udp's excepted: rxd completes a send when the receiver acknowledged it.
#include <catch2/catch.hpp>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "log_capture.h"
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

namespace {

// The flavours that run the rdma protocol (tag_layout.h's eager messages).
bool rdma_protocol() {
  for (const char* name : {"WEFT_OFI_PROTOCOL", "WEFT_TEST_PROTOCOL"}) {
    const char* value = std::getenv(name);
    if (value != nullptr && std::strcmp(value, "rdma") == 0) return true;
  }
  return false;
}

}  // namespace

// rdma protocol: an eager message whose receive is posted is copied once,
// from the endpoint's message pool into that receive; one that came first
// waits in a bounce buffer, and so do those behind it until it is placed.
// The receive comm says how many took each way when it closes.
TEST_CASE("eager messages go straight from the message pool into posted receives", "[eager]") {
  constexpr int kEarly = 2;
  constexpr int kPosted = 10;
  constexpr size_t kSize = 64;
  auto r = run_two(
      [&](Rank& rk) {  // receiver
        auto c = load_plugin(12);
        logged_lines().clear();
        FT_OK(c->init(capture_log));
        void* rc = recv_side_connect(*c, test_device(*c), *rk.peer);
        Buffer buf(kSize * (kEarly + kPosted));
        buf.poison();
        {
          Mr mr(*c, rc, buf.data(), buf.size());
          // The early ones: sent (and complete) before their receives exist.
          FT_REQUIRE(rk.peer->recv_str() == "sent", "out of step");
          for (int k = 0; k < kEarly + kPosted; ++k) {
            uint8_t* slot = static_cast<uint8_t*>(buf.data()) + kSize * static_cast<size_t>(k);
            void* req = post_irecv1(*c, rc, slot, kSize, k, mr.get());
            if (k >= kEarly) rk.peer->send_str("posted");
            int got[8] = {-1};
            wait_ok(*c, req, "eager message " + std::to_string(k), got);
            FT_REQUIRE(got[0] == static_cast<int>(kSize), "message " << k << ": " << got[0]);
            const std::string wrong = check_pattern(slot, kSize, pattern_seed(47, k));
            FT_REQUIRE(wrong.empty(), "message " << k << ": " << wrong);
          }
          rk.peer->sync("done");
        }
        FT_OK(c->close_recv(rc));
        FT_OK(c->finalize());
        const std::string info = logged_text(NCCL_LOG_INFO);
        const size_t at = info.find(" placed from the message pool, ");
        if (!rdma_protocol()) {
          FT_REQUIRE(at == std::string::npos, "the tagged protocol has no message pool:\n" << info);
          return;
        }
        FT_REQUIRE(at != std::string::npos, "no count of placed eager messages in:\n" << info);
        const size_t line = info.rfind('\n', at) + 1;
        unsigned long from_pool = 0, from_bounces = 0;
        FT_REQUIRE(
            std::sscanf(info.c_str() + info.find(": ", info.find("eager messages from", line)) + 2,
                        "%lu placed from the message pool, %lu through bounce buffers", &from_pool,
                        &from_bounces) == 2,
            "unreadable count: " << info.substr(line, info.find('\n', at) - line));
        // Each posted one came after its receive, with nothing waiting
        // before it; the first early one finds its receive posted when the
        // receiver first polls, the second may not.
        FT_REQUIRE(from_pool + from_bounces == kEarly + kPosted && from_pool >= kPosted,
                   from_pool << " from the pool, " << from_bounces << " through bounce buffers");
      },
      [&](Rank& rk) {  // sender
        auto c = open_plugin(12);
        void* sc = send_side_connect(*c, test_device(*c), *rk.peer);
        Buffer buf(kSize * (kEarly + kPosted));
        {
          Mr mr(*c, sc, buf.data(), buf.size());
          auto send = [&](int k) {
            uint8_t* data = static_cast<uint8_t*>(buf.data()) + kSize * static_cast<size_t>(k);
            fill_pattern(data, kSize, pattern_seed(47, k));
            std::vector<Pending> reqs(1);
            reqs[0].what = "send " + std::to_string(k);
            reqs[0].req = post_isend(*c, sc, data, kSize, k, mr.get());
            wait_all(*c, reqs);
          };
          for (int k = 0; k < kEarly; ++k) send(k);
          rk.peer->send_str("sent");
          for (int k = kEarly; k < kEarly + kPosted; ++k) {
            FT_REQUIRE(rk.peer->recv_str() == "posted", "out of step");
            send(k);
          }
          rk.peer->sync("done");
        }
        FT_OK(c->close_send(sc));
        FT_OK(c->finalize());
      });
  REQUIRE_RANKS(r);
}
