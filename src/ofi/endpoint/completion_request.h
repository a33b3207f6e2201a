// A libfabric request: its completions may be delivered by any thread
// polling a completion queue shared by several comms (the endpoint's), so
// its counters are atomic; the owning comm's thread reads the result after
// `pending_` drops to zero (acquire/release pairing).
#pragma once

#include <atomic>
#include <cstdio>
#include <type_traits>

#include "core/completion_target.h"
#include "core/net_events.h"
#include "core/request_owner.h"
#include "weft/transport.h"

namespace weft::ofi {

// A CompletionRequest's owner also turns a failed completion's provider
// error into NCCL's result.
class CompletionOwner : public RequestOwner {
 public:
  // Error code for a failed completion, with the peer named in the log.
  virtual ncclResult_t report_failure(int error, size_t overflow_length, size_t posted_size,
                                      const char* text) = 0;
  // Called on the thread that polled the failed completion, before the
  // request may finish: an owner whose other operations will now never
  // complete (a receive whose clear-to-send was lost) fails its connection
  // here, so that test() ends instead of waiting.
  virtual void operation_failed(uint32_t /*slot*/, int /*error*/, const char* /*text*/) {}

 protected:
  ~CompletionOwner() = default;
};

// Op: the transport's per-operation context, with members `target`
// (CompletionTarget*) and `slot` (uint32_t). Owner: the final class (a
// CompletionOwner) that starts it, so that test() calls its progress,
// recycle and report_failure directly rather than through its vtable.
template <int MaxOps, typename Op, typename Owner>
class CompletionRequest final : public Request, public CompletionTarget {
 public:
  CompletionRequest() {
    for (int i = 0; i < MaxOps; ++i) {
      ops_[i].target = this;
      ops_[i].slot = static_cast<uint32_t>(i);
    }
  }

  // Sends report their posted size: transports leave a send's length undefined.
  // `reported`: how many sizes test() returns when fewer than `count`
  // operations carry the caller's buffers (the rest are protocol messages).
  void start(Owner* owner, int count, bool is_send, int reported = -1) {
    owner_ = owner;
    is_send_ = is_send;
    count_ = count;
    reported_ = reported < 0 ? count : reported;
    error_.store(0, std::memory_order_relaxed);
    pending_.store(count, std::memory_order_relaxed);
  }

  Op* op(int slot) { return &ops_[slot]; }
  void set_posted_size(int slot, size_t size) { posted_sizes_[slot] = size; }
  size_t posted_size(int slot) const { return posted_sizes_[slot]; }
  int count() const { return count_; }
  bool finished() const { return pending_.load(std::memory_order_acquire) == 0; }
  // Marks an operation that completed on return (inject, nothing to do).
  void complete_now(uint32_t slot) { on_complete(slot, posted_sizes_[slot], nullptr); }
  // For ops that will never be posted (the comm is closing).
  void drop_unposted(int unposted) { pending_.fetch_sub(unposted, std::memory_order_acq_rel); }

  ncclResult_t test(int* done, int* sizes) override {
    static_assert(std::is_base_of_v<CompletionOwner, Owner> && std::is_final_v<Owner>);
    *done = 0;
    if (!finished()) {
      ncclResult_t result = owner_->progress();
      if (result != ncclSuccess) return result;
      if (!finished()) return ncclSuccess;
    }
    Owner* owner = owner_;
    int error = error_.load(std::memory_order_relaxed);
    if (error != 0) {
      ncclResult_t result =
          owner->report_failure(error, error_overflow_, posted_sizes_[error_slot_], error_text_);
      owner->recycle(this);
      return result;
    }
    if (sizes != nullptr) {
      for (int i = 0; i < reported_; ++i) sizes[i] = static_cast<int>(lengths_[i]);
    }
    *done = 1;
    owner->recycle(this);
    return ncclSuccess;
  }

  void on_complete(uint32_t slot, size_t length, const uint64_t* remote_data) override {
    if (is_send_) {
      lengths_[slot] = posted_sizes_[slot];
      // A transport that records shares records operation i as share i.
      if (net_events) [[unlikely]]
        share_done(*this, static_cast<int>(slot));
    } else if (remote_data != nullptr && *remote_data > posted_sizes_[slot]) {
      // Some transports truncate silently: the sender's size tells.
      on_error(slot, kTruncated, *remote_data - posted_sizes_[slot], "message truncated");
      return;
    } else if (remote_data != nullptr && *remote_data != length) {
      // The sender's size and what landed disagree (a peer's bug): never
      // report bytes that did not arrive.
      char text[128];
      std::snprintf(text, sizeof(text), "the sender's message size says %llu bytes, %zu arrived",
                    static_cast<unsigned long long>(*remote_data), length);
      on_error(slot, kPeerProtocolError, 0, text);
      return;
    } else if (remote_data == nullptr && length > posted_sizes_[slot]) {
      // More than was posted landed (a transport's scratch space for an
      // empty receive): never report a size beyond the caller's buffer.
      on_error(slot, kTruncated, length - posted_sizes_[slot], "message truncated");
      return;
    } else {
      lengths_[slot] = remote_data != nullptr ? *remote_data : length;
    }
    pending_.fetch_sub(1, std::memory_order_acq_rel);
  }

  void on_error(uint32_t slot, int error, size_t overflow_length, const char* text) override {
    owner_->operation_failed(slot, error, text);
    int expected = 0;
    if (error_.compare_exchange_strong(expected, error, std::memory_order_acq_rel)) {
      error_slot_ = slot;
      error_overflow_ = overflow_length;
      std::snprintf(error_text_, sizeof(error_text_), "%s", text);
    }
    lengths_[slot] = 0;
    pending_.fetch_sub(1, std::memory_order_acq_rel);
  }

 private:
  Op ops_[MaxOps];
  size_t lengths_[MaxOps] = {};
  size_t posted_sizes_[MaxOps] = {};
  Owner* owner_ = nullptr;
  int count_ = 0;
  int reported_ = 0;
  bool is_send_ = false;
  std::atomic<int> pending_{0};
  std::atomic<int> error_{0};
  uint32_t error_slot_ = 0;
  size_t error_overflow_ = 0;
  char error_text_[160] = {};
};

}  // namespace weft::ofi
