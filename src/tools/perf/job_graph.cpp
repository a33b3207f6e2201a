#include "job_graph.h"

#include <map>
#include <utility>

#include "errors.h"

namespace weft::perf {

const char* job_pattern_name(JobPattern pattern) {
  switch (pattern) {
    case JobPattern::ring:
      return "ring";
    case JobPattern::tree:
      return "tree";
    case JobPattern::alltoall:
      return "alltoall";
  }
  return "?";
}

JobPattern parse_job_pattern(const std::string& name) {
  for (JobPattern p : {JobPattern::ring, JobPattern::tree, JobPattern::alltoall})
    if (name == job_pattern_name(p)) return p;
  throw UsageError("--job expects ring, tree or alltoall; got '" + name + "'");
}

namespace {

// Every directed edge of the job, in one order all ranks agree on; the
// lane of an edge counts the earlier edges of the same pair.
std::vector<std::pair<int, int>> edges_of(JobPattern pattern, int ranks, int channels) {
  std::vector<std::pair<int, int>> edges;
  for (int c = 0; c < channels; ++c) {
    switch (pattern) {
      case JobPattern::ring:
        for (int r = 0; r < ranks; ++r) edges.emplace_back(r, (r + 1) % ranks);
        break;
      case JobPattern::tree:
        // Tree 0: node p's parent is (p - 1) / 2 with p the rank; tree 1 the
        // same over p = ranks - 1 - rank, which turns leaves into inner nodes.
        for (int tree = 0; tree < 2; ++tree) {
          auto rank_at = [&](int p) { return tree == 0 ? p : ranks - 1 - p; };
          for (int p = 1; p < ranks; ++p) {
            const int child = rank_at(p), parent = rank_at((p - 1) / 2);
            edges.emplace_back(child, parent);
            edges.emplace_back(parent, child);
          }
        }
        break;
      case JobPattern::alltoall:
        for (int i = 0; i < ranks; ++i)
          for (int j = 0; j < ranks; ++j)
            if (i != j) edges.emplace_back(i, j);
        break;
    }
  }
  return edges;
}

}  // namespace

RankComms job_comms(JobPattern pattern, int rank, int ranks, int channels) {
  RankComms comms;
  std::map<std::pair<int, int>, int> lanes;
  for (const auto& [from, to] : edges_of(pattern, ranks, channels)) {
    const int lane = lanes[{from, to}]++;
    if (from == rank) comms.sends.push_back({to, lane});
    if (to == rank) comms.recvs.push_back({from, lane});
  }
  return comms;
}

}  // namespace weft::perf
