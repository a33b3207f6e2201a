// Runs test bodies as separate processes ("ranks"), the way NCCL ranks are.
// The Catch2 process never loads the plugin: it forks one child per rank,
// each child loads the plugin itself (after the fork), and the children talk
// over a socketpair (handles, small sync messages). The harness collects
// each child's exit status and failure text and kills every child once the
// deadline (WEFT_TEST_TIMEOUT + margin) has passed.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "channel.h"
#include "plugin_under_test.h"

namespace weft::ft {

struct Rank {
  int id = 0;
  Channel* peer = nullptr;  // null when run alone
};

using RankBody = std::function<void(Rank&)>;

struct RanksResult {
  bool ok = false;
  std::string report;  // one line per rank: how it ended and why
};

// One or two bodies; two bodies get a channel between them.
RanksResult run_ranks(const std::vector<RankBody>& bodies);

inline RanksResult run_two(const RankBody& rank0, const RankBody& rank1) {
  return run_ranks({rank0, rank1});
}
inline RanksResult run_one(const RankBody& rank0) {
  return run_ranks({rank0});
}

}  // namespace weft::ft

// In a Catch2 test: fail with every rank's report unless all ranks passed.
#define REQUIRE_RANKS(result)      \
  do {                             \
    const auto& w_res_ = (result); \
    INFO(w_res_.report);           \
    REQUIRE(w_res_.ok);            \
  } while (0)
