#include "rank_team.h"

#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <new>
#include <string>
#include <thread>

#include "rank_netns.h"

namespace weft::rt {

void Team::fail(const std::string& failure) {
  std::snprintf(shared_->failures[rank_], sizeof(shared_->failures[rank_]), "%s", failure.c_str());
  std::fprintf(stderr, "rank %d: %s\n", rank_, failure.c_str());
  std::fflush(nullptr);
  ::_exit(1);
}

int Team::arrive() {
  int generation = shared_->generation.load(std::memory_order_acquire);
  if (shared_->arrived.fetch_add(1, std::memory_order_acq_rel) + 1 == size_) {
    shared_->arrived.store(0, std::memory_order_relaxed);
    shared_->generation.fetch_add(1, std::memory_order_acq_rel);
  }
  return generation;
}

bool Team::passed(int generation) const {
  return shared_->generation.load(std::memory_order_acquire) != generation;
}

bool Team::barrier(int timeout_ms) {
  int generation = arrive();
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (!passed(generation)) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  return true;
}

std::vector<std::string> run_team(int ranks, const std::function<std::string(Team&)>& body,
                                  int timeout_s,
                                  const std::vector<std::vector<std::string>>& environment) {
  std::vector<std::string> failures;
  if (ranks < 1 || ranks > kMaxRanks) return {"bad rank count " + std::to_string(ranks)};
  void* memory = ::mmap(nullptr, sizeof(TeamShared), PROT_READ | PROT_WRITE,
                        MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (memory == MAP_FAILED) return {"mmap of the team's shared page failed"};
  auto* shared = new (memory) TeamShared();
  std::vector<pid_t> children;
  for (int r = 0; r < ranks; ++r) {
    pid_t pid = ::fork();
    if (pid == 0) {
      if (r < static_cast<int>(environment.size())) {
        for (const std::string& setting : environment[r]) {
          ::putenv(::strdup(setting.c_str()));
        }
      }
      Team team(shared, r, ranks);
      std::string failure;
      try {
        ft::enter_rank_netns(r);
        failure = body(team);
      } catch (const std::exception& e) {
        failure = std::string("exception: ") + e.what();
      } catch (...) {
        failure = "unknown exception";
      }
      std::snprintf(shared->failures[r], sizeof(shared->failures[r]), "%s", failure.c_str());
      if (!failure.empty()) std::fprintf(stderr, "rank %d: %s\n", r, failure.c_str());
      std::fflush(nullptr);
      ::_exit(failure.empty() ? 0 : 1);
    }
    children.push_back(pid);
  }
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
  std::vector<int> status(ranks, -1);
  int remaining = ranks;
  while (remaining > 0) {
    for (int r = 0; r < ranks; ++r) {
      if (status[r] != -1) continue;
      int raw = 0;
      if (::waitpid(children[r], &raw, WNOHANG) == children[r]) {
        status[r] = raw;
        --remaining;
      }
    }
    if (remaining > 0 && std::chrono::steady_clock::now() > deadline) {
      for (int r = 0; r < ranks; ++r) {
        if (status[r] != -1) continue;
        ::kill(children[r], SIGKILL);
        int raw = 0;
        ::waitpid(children[r], &raw, 0);
        status[r] = raw;
        std::snprintf(shared->failures[r], sizeof(shared->failures[r]),
                      "still running after %d s (killed)%s%s", timeout_s,
                      shared->failures[r][0] != 0 ? "; reported: " : "", "");
      }
      remaining = 0;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  for (int r = 0; r < ranks; ++r) {
    bool passed = WIFEXITED(status[r]) && WEXITSTATUS(status[r]) == 0;
    if (passed) continue;
    std::string what = shared->failures[r];
    if (what.empty()) {
      what = WIFSIGNALED(status[r]) ? "killed by signal " + std::to_string(WTERMSIG(status[r]))
                                    : "exited " + std::to_string(WEXITSTATUS(status[r]));
    }
    failures.push_back("rank " + std::to_string(r) + ": " + what);
  }
  shared->~TeamShared();
  ::munmap(memory, sizeof(TeamShared));
  return failures;
}

}  // namespace weft::rt
