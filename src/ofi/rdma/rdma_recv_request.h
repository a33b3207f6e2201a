// A receive of the rdma protocol: a group of entries, each filled by the
// peer's writes or by an eager message, and the group's clear-to-send.
// None of these is posted to the provider with a context of its own, so
// the receive path completes them by direct calls from whichever thread
// polled; test() progresses the path. Everything a test() does is in this
// room: the path's progress, this request's result, the path's pool.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdio>

#include "core/completion_target.h"
#include "ofi/wire/rdma_wire.h"
#include "weft/transport.h"

namespace weft::ofi {

class RdmaRecvPath;

class RdmaRecvRequest final : public Request {
 public:
  // The clear-to-send's operation, after the entries.
  static constexpr uint32_t kCtsOp = kRdmaMaxEntries;

  // `entries` receives and their clear-to-send; sizes are set per entry.
  void start(RdmaRecvPath* path, int entries) {
    path_ = path;
    entries_ = entries;
    error_.store(0, std::memory_order_relaxed);
    pending_.store(entries + 1, std::memory_order_relaxed);
  }
  void set_posted_size(int entry, size_t size) { posted_sizes_[entry] = size; }
  bool finished() const { return pending_.load(std::memory_order_acquire) == 0; }

  // Entry `entry` holds `length` bytes; more than was posted never reaches
  // the caller as a size.
  void entry_done(uint32_t entry, size_t length) {
    if (length > posted_sizes_[entry]) {
      fail(entry, kTruncated, length - posted_sizes_[entry], "message truncated");
      return;
    }
    lengths_[entry] = length;
    pending_.fetch_sub(1, std::memory_order_acq_rel);
  }
  // The clear-to-send went, eager messages made it unneeded, or the comm
  // is closing and it will never go.
  void cts_done() { pending_.fetch_sub(1, std::memory_order_acq_rel); }
  // Operation `op` (an entry or kCtsOp) failed; test() reports the first
  // failure.
  void fail(uint32_t op, int error, size_t overflow_length, const char* text) {
    int expected = 0;
    if (error_.compare_exchange_strong(expected, error, std::memory_order_acq_rel)) {
      error_op_ = op;
      error_overflow_ = overflow_length;
      std::snprintf(error_text_, sizeof(error_text_), "%s", text);
    }
    if (op < kCtsOp) lengths_[op] = 0;
    pending_.fetch_sub(1, std::memory_order_acq_rel);
  }

  ncclResult_t test(int* done, int* sizes) override;

 private:
  RdmaRecvPath* path_ = nullptr;
  int entries_ = 0;
  std::atomic<int> pending_{0};
  std::atomic<int> error_{0};
  size_t lengths_[kRdmaMaxEntries] = {};
  size_t posted_sizes_[kRdmaMaxEntries] = {};
  uint32_t error_op_ = 0;
  size_t error_overflow_ = 0;
  char error_text_[160] = {};
};

}  // namespace weft::ofi
