// Runs one function on --threads threads (thread 0 is the caller) and lets
// them meet at phase boundaries. A failing thread raises the abort flag so
// the others stop at their next barrier or idle check instead of waiting for
// messages that will never come; the first error is rethrown to the caller.
#pragma once

#include <atomic>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "errors.h"

namespace weft::perf {

class ThreadTeam {
 public:
  explicit ThreadTeam(int threads) : threads_(threads) {}

  int size() const { return threads_; }
  const std::atomic<bool>& abort_flag() const { return abort_; }

  void run(const std::function<void(int thread)>& body) {
    abort_ = false;
    first_error_ = nullptr;
    arrived_ = 0;
    std::vector<std::thread> workers;
    workers.reserve(static_cast<size_t>(threads_ - 1));
    for (int t = 1; t < threads_; ++t) workers.emplace_back([&, t] { guarded(body, t); });
    guarded(body, 0);
    for (auto& w : workers) w.join();
    if (first_error_) std::rethrow_exception(first_error_);
  }

  // Spin barrier: the threads are polling anyway, and a blocking barrier
  // could not notice the abort flag.
  void sync() {
    if (threads_ == 1) return;
    unsigned gen = generation_.load(std::memory_order_acquire);
    if (arrived_.fetch_add(1, std::memory_order_acq_rel) + 1 == threads_) {
      arrived_.store(0, std::memory_order_relaxed);
      generation_.fetch_add(1, std::memory_order_release);
      return;
    }
    while (generation_.load(std::memory_order_acquire) == gen) {
      if (abort_.load(std::memory_order_relaxed)) {
        throw PerfError("stopped: another thread of this rank failed");
      }
      std::this_thread::yield();
    }
  }

 private:
  void guarded(const std::function<void(int)>& body, int t) {
    try {
      body(t);
    } catch (...) {
      std::lock_guard<std::mutex> lock(error_mutex_);
      if (!first_error_) first_error_ = std::current_exception();
      abort_ = true;
    }
  }

  int threads_;
  std::atomic<bool> abort_{false};
  std::atomic<int> arrived_{0};
  std::atomic<unsigned> generation_{0};
  std::mutex error_mutex_;
  std::exception_ptr first_error_;
};

}  // namespace weft::perf
