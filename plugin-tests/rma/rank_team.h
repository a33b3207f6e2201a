// N ranks, each its own forked process, sharing one anonymous mapping for
// their listen handles, a barrier and what each has to report. A rank's
// body returns an empty string when all its checks passed, or what failed;
// the Catch2 process only forks and collects, and never loads the plugin.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace weft::rt {

constexpr int kMaxRanks = 16;
constexpr size_t kHandleBytes = 128;

struct TeamShared {
  std::atomic<int> arrived;
  std::atomic<int> generation;
  std::atomic<uint64_t> words[64];  // scratch the ranks agree on per test
  unsigned char handles[kMaxRanks][kHandleBytes];
  char failures[kMaxRanks][1024];
};

class Team {
 public:
  Team(TeamShared* shared, int rank, int size) : shared_(shared), rank_(rank), size_(size) {}
  int rank() const { return rank_; }
  int size() const { return size_; }
  // False when not every rank arrived within `timeout_ms`.
  bool barrier(int timeout_ms = 120000);
  // The same in two steps, for a rank that must keep working while it
  // waits (a one-sided target on a manual-progress provider).
  int arrive();
  bool passed(int generation) const;
  unsigned char* handle(int rank) { return shared_->handles[rank]; }
  // Reports `failure` and ends this rank's process at once: nothing is
  // closed while its peers may still write into its memory.
  [[noreturn]] void fail(const std::string& failure);
  std::atomic<uint64_t>& word(int i) { return shared_->words[i]; }

 private:
  TeamShared* shared_;
  int rank_;
  int size_;
};

// Runs `body` in `ranks` processes; returns "rank R: what failed" for each
// that did not pass (exited non-zero, crashed, reported, or still ran after
// `timeout_s`, then killed). `environment[r]`, when given, is extra
// NAME=VALUE settings for rank r.
std::vector<std::string> run_team(int ranks, const std::function<std::string(Team&)>& body,
                                  int timeout_s,
                                  const std::vector<std::vector<std::string>>& environment = {});

}  // namespace weft::rt
