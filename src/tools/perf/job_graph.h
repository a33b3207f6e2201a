// The comms of a job pattern: which rank sends to which on which lane, as
// NCCL's transport setup opens them. A link i -> j on lane l is a send comm
// at rank i and a receive comm at rank j (j listens, i connects); lanes
// tell apart the comms one pair of ranks holds in one direction (channels,
// and the two trees of a channel).
//   ring:     per channel, rank r sends to r+1 and receives from r-1.
//   tree:     per channel, NCCL's double binary tree: two binary trees, the
//             second mirrored so that the first's leaves are its inner
//             nodes; each edge carries a comm each way.
//   alltoall: every ordered pair of ranks, once per channel.
#pragma once

#include <string>
#include <vector>

namespace weft::perf {

enum class JobPattern { ring, tree, alltoall };
const char* job_pattern_name(JobPattern pattern);
// Throws UsageError naming the patterns for anything else.
JobPattern parse_job_pattern(const std::string& name);

struct JobLink {
  int peer = 0;  // the rank at the other end
  int lane = 0;  // 0.. per (sender, receiver) pair
  bool operator==(const JobLink&) const = default;
};

struct RankComms {
  std::vector<JobLink> sends;  // send comms of this rank, peer = receiver
  std::vector<JobLink> recvs;  // receive comms, peer = sender
};

// Rank `rank`'s comms in a job of `ranks` ranks (at least 2) with
// `channels` channels.
RankComms job_comms(JobPattern pattern, int rank, int ranks, int channels);

}  // namespace weft::perf
