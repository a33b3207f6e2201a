#include "job_graph.h"

#include <catch2/catch.hpp>
#include <map>
#include <set>
#include <tuple>

using namespace weft::perf;

namespace {

// Every send comm i -> j on lane l has exactly one receive comm at j from i
// on lane l, and no receive comm lacks its send comm.
void check_matched(JobPattern pattern, int ranks, int channels, size_t* pairs) {
  std::multiset<std::tuple<int, int, int>> sends, recvs;
  for (int r = 0; r < ranks; ++r) {
    RankComms c = job_comms(pattern, r, ranks, channels);
    for (const JobLink& l : c.sends) {
      CHECK(l.peer != r);
      sends.insert({r, l.peer, l.lane});
    }
    for (const JobLink& l : c.recvs) recvs.insert({l.peer, r, l.lane});
  }
  CHECK(sends == recvs);
  CHECK(std::set<std::tuple<int, int, int>>(sends.begin(), sends.end()).size() == sends.size());
  *pairs = sends.size();
}

}  // namespace

TEST_CASE("job patterns: every send comm meets one receive comm", "[unit][tools]") {
  for (JobPattern p : {JobPattern::ring, JobPattern::tree, JobPattern::alltoall}) {
    for (int ranks : {2, 3, 7, 16, 64}) {
      INFO(job_pattern_name(p) << " over " << ranks << " ranks");
      size_t pairs = 0;
      check_matched(p, ranks, 3, &pairs);
      if (p == JobPattern::ring) CHECK(pairs == static_cast<size_t>(3 * ranks));
      if (p == JobPattern::alltoall) CHECK(pairs == static_cast<size_t>(3 * ranks * (ranks - 1)));
      // Two trees of ranks - 1 edges, a comm each way on each edge.
      if (p == JobPattern::tree) CHECK(pairs == static_cast<size_t>(3 * 2 * 2 * (ranks - 1)));
    }
  }
}

TEST_CASE("job patterns: ring neighbours, alltoall peers, the trees' mirrored leaves",
          "[unit][tools]") {
  RankComms ring = job_comms(JobPattern::ring, 0, 16, 8);
  REQUIRE(ring.sends.size() == 8);
  for (int c = 0; c < 8; ++c) {
    CHECK(ring.sends[c] == JobLink{1, c});
    CHECK(ring.recvs[c] == JobLink{15, c});
  }
  RankComms all = job_comms(JobPattern::alltoall, 5, 64, 1);
  CHECK(all.sends.size() == 63);
  CHECK(all.recvs.size() == 63);
  // 16 ranks: in tree 0, rank 15 is a leaf (one edge); mirrored, it is the
  // root of tree 1 (two children). A comm each way per edge.
  RankComms leaf = job_comms(JobPattern::tree, 15, 16, 1);
  CHECK(leaf.sends.size() == 3);
  RankComms root = job_comms(JobPattern::tree, 0, 16, 1);
  CHECK(root.sends.size() == 3);  // root of tree 0, leaf of tree 1
  std::map<int, int> degree;
  for (int r = 0; r < 16; ++r)
    degree[r] = static_cast<int>(job_comms(JobPattern::tree, r, 16, 1).sends.size());
  for (const auto& [rank, d] : degree) {
    INFO("rank " << rank);
    CHECK(d >= 2);  // no rank is a leaf of both trees
    CHECK(d <= 6);
  }
}
