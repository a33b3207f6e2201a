// Network events for NCCL's profiler (net ABI v10+): what a plugin may do
// with the callback init gets and the parent handles isend/irecv get, as
// NCCL's callback and profilers rely on it (docs/profiler.md). A plugin
// that emits no events passes; one that emits them must start each under a
// parent it was given, in a form NCCL's profilers decode, at most 8 per
// parent, and stop each exactly once by the time test() reports its
// request done. WEFT_TEST_PROFILER_EVENTS=1 also requires an event for
// every message posted with a parent (weft with WEFT_NET_PROFILER=on), and
// WEFT_TEST_PROFILER_SHARES=k that under each send's parent the message's
// event is followed by exactly k share events (one per queue pair or rail
// the message went out on) whose lengths add up to the message.
#include <catch2/catch.hpp>
#include <cstdlib>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "net_ops.h"
#include "two_rank.h"

using namespace weft;
using namespace weft::ft;

namespace {

// Everything the plugin told the callback, checked as it happens; the
// first broken rule is kept and reported by the rank.
struct Recorder {
  std::mutex mutex;
  std::set<const void*> parents_given;
  std::map<const void*, int> starts_per_parent;
  std::map<void*, const void*> open_events;  // event handle -> its parent
  // Lengths of the IB-form events under each parent, in start order.
  std::map<const void*, std::vector<uint64_t>> lengths;
  int starts = 0, stops = 0;
  std::string broken;

  void fail(const std::string& why) {
    if (broken.empty()) broken = why;
  }
};

Recorder g_recorder;
char g_event_tokens[4096];  // handles the callback hands out: distinct addresses
int g_next_token = 0;

ncclResult_t record(void** event, int type, void* parent, int64_t plugin_id, void* ext_data) {
  Recorder& r = g_recorder;
  std::lock_guard<std::mutex> lock(r.mutex);
  if (event == nullptr) {
    r.fail("callback given a NULL event handle pointer (type " + std::to_string(type) + ")");
    return ncclSuccess;
  }
  if (type == 0) {  // start
    ++r.starts;
    if (parent == nullptr) {
      r.fail("event started with a NULL parent handle: NCCL dereferences it");
      return ncclSuccess;
    }
    if (!r.parents_given.count(parent)) r.fail("event started under a parent no call was given");
    const int64_t kind = plugin_id & 0xffff0000, version = plugin_id & 0xffff;
    if ((kind != (1 << 16) && kind != (2 << 16)) || version != 1) {
      r.fail("event plugin id " + std::to_string(plugin_id) +
             " is neither IB v1 nor socket v1, the forms NCCL's profilers decode");
    }
    if (ext_data == nullptr) r.fail("event started without a descriptor");
    if (ext_data != nullptr && kind == (1 << 16)) {
      r.lengths[parent].push_back(
          static_cast<const ncclProfilerNetIbDescr_v1_t*>(ext_data)->qp.length);
    }
    if (++r.starts_per_parent[parent] > 8) {
      r.fail("more than 8 events under one parent: NCCL's example profiler keeps 8");
    }
    *event = &g_event_tokens[g_next_token++ % sizeof(g_event_tokens)];
    r.open_events[*event] = parent;
    return ncclSuccess;
  }
  if (type == 1 || type == 3) {  // stop, update and stop
    ++r.stops;
    if (r.open_events.erase(*event) == 0) r.fail("stop of an event that was not started, or twice");
    return ncclSuccess;
  }
  if (type != 2) r.fail("callback type " + std::to_string(type) + " is not one NCCL defines");
  return ncclSuccess;
}

// Events of `parents` still open: must be none once their request is done.
void check_closed(const std::vector<const void*>& parents, const std::string& what) {
  std::lock_guard<std::mutex> lock(g_recorder.mutex);
  for (const auto& [event, parent] : g_recorder.open_events) {
    for (const void* p : parents) {
      if (parent == p)
        g_recorder.fail("an event of " + what + " still open after test() said done");
    }
  }
}

void give(const std::vector<const void*>& parents) {
  std::lock_guard<std::mutex> lock(g_recorder.mutex);
  g_recorder.parents_given.insert(parents.begin(), parents.end());
}

// WEFT_TEST_PROFILER_SHARES: the share events each send must have.
int expected_shares() {
  const char* value = std::getenv("WEFT_TEST_PROFILER_SHARES");
  return value != nullptr ? std::atoi(value) : -1;
}

// Each send's parent: its message event, then exactly `shares` share
// events adding up to `size`.
void check_shares(const std::vector<const void*>& send_parents, int shares, size_t size) {
  std::lock_guard<std::mutex> lock(g_recorder.mutex);
  for (const void* parent : send_parents) {
    const std::vector<uint64_t>& lengths = g_recorder.lengths[parent];
    FT_REQUIRE(
        static_cast<int>(lengths.size()) == 1 + shares,
        lengths.size() << " events under a send's parent, expected 1 + " << shares << " shares");
    uint64_t sum = 0;
    for (size_t i = 1; i < lengths.size(); ++i) sum += lengths[i];
    FT_REQUIRE(lengths[0] == size && (shares == 0 || sum == size),
               "message event of " << lengths[0] << " bytes, shares adding up to " << sum
                                   << ", for a message of " << size);
  }
}

void check_rank(bool expect_events, int messages_with_parents) {
  std::lock_guard<std::mutex> lock(g_recorder.mutex);
  FT_REQUIRE(g_recorder.broken.empty(), "profiler rule broken: " << g_recorder.broken);
  FT_REQUIRE(g_recorder.open_events.empty(), g_recorder.open_events.size()
                                                 << " events never stopped");
  if (expect_events) {
    FT_REQUIRE(g_recorder.starts >= messages_with_parents,
               g_recorder.starts << " events for " << messages_with_parents
                                 << " messages posted with a parent handle");
  }
}

constexpr int kMessages = 16;
constexpr size_t kSize = 64 << 10;
char g_parents[2 * kMessages + 2];  // parent handles: distinct addresses

}  // namespace

TEST_CASE("profiler events start under given parents and stop by the time test() says done",
          "[profiler]") {
  const int v = newest_selected_version();
  if (v < 10) return;  // no callback before net v10
  INFO("ABI v" << v);
  const char* expect = std::getenv("WEFT_TEST_PROFILER_EVENTS");
  const bool expect_events = expect != nullptr && std::string(expect) == "1";

  auto r = run_two(
      [&](Rank& rk) {  // receiver: single and grouped receives, one without parents
        auto c = load_plugin(v);
        FT_OK(c->init(nullptr, record));
        void* rc = recv_side_connect(*c, test_device(*c), *rk.peer);
        std::vector<Buffer> bufs;
        std::vector<std::unique_ptr<Mr>> mrs;
        for (int i = 0; i < kMessages + 1; ++i) {
          bufs.emplace_back(kSize);
          mrs.push_back(std::make_unique<Mr>(*c, rc, bufs.back().data(), kSize));
        }
        int with_parents = 0;
        for (int i = 0; i < kMessages;) {
          const int n = (i % 4 == 2) ? 2 : 1;  // some grouped receives of 2
          void* data[2];
          size_t sizes[2];
          int tags[2];
          void* mhs[2];
          void* parents[2];
          for (int e = 0; e < n; ++e) {
            data[e] = bufs[i + e].data();
            sizes[e] = kSize;
            tags[e] = i + e;
            mhs[e] = mrs[i + e]->get();
            parents[e] = &g_parents[i + e];
          }
          const std::vector<const void*> mine(parents, parents + n);
          give(mine);
          void* req = nullptr;
          for (;;) {
            FT_OK(c->irecv(rc, n, data, sizes, tags, mhs, &req, parents));
            if (req != nullptr) break;
            FT_DEADLINE("irecv kept returning a NULL request");
          }
          int got[2] = {-1, -1};
          wait_ok(*c, req, "receive " + std::to_string(i), got);
          check_closed(mine, "receive " + std::to_string(i));
          for (int e = 0; e < n; ++e) {
            check_received(bufs[i + e], got[e], kSize, kSize, pattern_seed(7700, i + e),
                           "receive " + std::to_string(i + e));
          }
          with_parents += n;
          i += n;
        }
        // NCCL's bootstrap posts without parents: no event may start.
        void* plain = post_irecv1(*c, rc, bufs[kMessages].data(), kSize, 99, mrs[kMessages]->get());
        wait_ok(*c, plain, "receive without a parent");
        rk.peer->sync("done");
        check_rank(expect_events, with_parents);
        mrs.clear();
        FT_OK(c->close_recv(rc));
        FT_OK(c->finalize());
      },
      [&](Rank& rk) {  // sender
        auto c = load_plugin(v);
        FT_OK(c->init(nullptr, record));
        void* sc = send_side_connect(*c, test_device(*c), *rk.peer);
        std::vector<Buffer> bufs;
        std::vector<std::unique_ptr<Mr>> mrs;
        for (int i = 0; i < kMessages + 1; ++i) {
          bufs.emplace_back(kSize);
          mrs.push_back(std::make_unique<Mr>(*c, sc, bufs.back().data(), kSize));
        }
        // All posted before any is waited for, as NCCL does: a send into a
        // grouped receive may complete only once the group's others are posted.
        std::vector<void*> reqs(kMessages, nullptr);
        for (int i = 0; i < kMessages; ++i) {
          fill_pattern(bufs[i].data(), kSize, pattern_seed(7700, i));
          void* parent = &g_parents[kMessages + 1 + i];
          give(std::vector<const void*>{parent});
          for (;;) {
            FT_OK(c->isend(sc, bufs[i].data(), kSize, i, mrs[i]->get(), &reqs[i], parent));
            if (reqs[i] != nullptr) break;
            FT_DEADLINE("isend kept returning a NULL request");
          }
        }
        for (int i = 0; i < kMessages; ++i) {
          wait_ok(*c, reqs[i], "send " + std::to_string(i));
          check_closed(std::vector<const void*>{&g_parents[kMessages + 1 + i]},
                       "send " + std::to_string(i));
        }
        fill_pattern(bufs[kMessages].data(), kSize, pattern_seed(7700, 99));
        void* plain = post_isend(*c, sc, bufs[kMessages].data(), kSize, 99, mrs[kMessages]->get());
        wait_ok(*c, plain, "send without a parent");
        rk.peer->sync("done");
        check_rank(expect_events, kMessages);
        if (expected_shares() >= 0) {
          std::vector<const void*> send_parents;
          for (int i = 0; i < kMessages; ++i) send_parents.push_back(&g_parents[kMessages + 1 + i]);
          check_shares(send_parents, expected_shares(), kSize);
        }
        mrs.clear();
        FT_OK(c->close_send(sc));
        FT_OK(c->finalize());
      });
  REQUIRE_RANKS(r);
}
