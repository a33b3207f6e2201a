// A block of one-sided contexts over libfabric. Each (context, rank) pair
// is a channel: its operations are posted in the order NCCL issued them,
// and a signal is posted only once every earlier operation of its channel
// completed. A write completes when its data is visible at the target
// (FI_DELIVERY_COMPLETE), so the signal, a 64-bit fi_atomic add, can never
// be seen before the data it covers, on fabrics that reorder (EFA's SRD)
// as on those that do not. Strong and weak signals both get that order.
//
// No allocation on the data path: requests come from a pool, a channel's
// queue of waiting requests is a ring that grows only past its high-water
// mark. The block's lock is uncontended (NCCL drives a block from one
// thread); completions may arrive on any thread polling the endpoint and
// touch only atomics.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "core/request_pool.h"
#include "core/ring_queue.h"
#include "ofi/completion.h"
#include "ofi/rma_comm.h"
#include "weft/one_sided.h"

namespace weft::ofi {

class OfiRmaContext;

class OfiRmaRequest final : public Request, public CompletionTarget {
 public:
  static constexpr int kMaxChunks = 16;
  enum class Kind : uint8_t { Put, Get, Fence };

  OfiRmaRequest();
  ncclResult_t test(int* done, int* sizes) override;
  void on_complete(uint32_t slot, size_t length, const uint64_t* remote_data) override;
  void on_error(uint32_t slot, int error, size_t overflow_length, const char* text) override;

 private:
  friend class OfiRmaContext;
  bool finished() const { return pending_.load(std::memory_order_acquire) == 0; }
  // One operation fewer to wait for (completed, failed, or never posted).
  void settle(int count);

  OfiRmaContext* owner_ = nullptr;
  std::atomic<uint32_t>* inflight_ = nullptr;  // its channel's count
  Kind kind_ = Kind::Put;
  uint32_t rank_ = 0;
  uint8_t* local_ = nullptr;
  void* descriptor_ = nullptr;
  uint64_t remote_ = 0;
  uint64_t key_ = 0;
  size_t size_ = 0;
  size_t chunk_ = 0;
  int chunks_ = 0;
  int posted_ = 0;
  bool signal_ = false;
  bool signal_posted_ = false;
  // Its slot in the block's registered operands: the atomic's operand, or
  // the signal message.
  uint64_t* operand_ = nullptr;
  uint64_t signal_remote_ = 0;
  uint64_t signal_key_ = 0;
  std::atomic<int> pending_{0};
  std::atomic<int> error_{0};
  char error_text_[160] = {};
  OpContext ops_[kMaxChunks + 1];
};

class OfiRmaContext final : public RmaContext {
 public:
  OfiRmaContext(OfiRmaComm& comm, const RmaContextConfig& config);
  ~OfiRmaContext() override;
  // Registers the signals' operands.
  ncclResult_t open();

  ncclResult_t put(int context, uint64_t src_offset, void* src_region, size_t size,
                   uint64_t dst_offset, void* dst_region, uint32_t rank, const SignalSpec* signal,
                   Request** request) override;
  ncclResult_t get(int context, uint64_t remote_offset, void* remote_region, size_t size,
                   uint64_t local_offset, void* local_region, uint32_t rank,
                   Request** request) override;
  ncclResult_t flush(int context, uint32_t rank, Request** request) override;
  ncclResult_t progress() override;
  bool failed() const override { return failed_.load(std::memory_order_relaxed); }

  // Whether requests are still in flight (their memory must outlive them).
  bool busy();

 private:
  friend class OfiRmaRequest;
  // One (context, rank) pair.
  struct Channel {
    std::atomic<uint32_t> inflight{0};  // posted, not completed
    RingQueue<OfiRmaRequest*> waiting;  // not wholly posted, in issue order
    bool listed = false;                // in blocked_
  };

  // Validates the common arguments; null channel on error (logged).
  Channel* channel_for(int context, uint32_t rank, const char* what);
  // A fresh request for `channel`, or null (logged) when the pool is spent.
  OfiRmaRequest* start(Channel& channel, OfiRmaRequest::Kind kind, uint32_t rank, const char* what);
  // Validates a put's or get's arguments and starts its request (null
  // channel or request and a log naming `what` on error).
  ncclResult_t prepare(OfiRmaRequest::Kind kind, int context, uint32_t rank, void* local_region,
                       uint64_t local_offset, void* remote_region, uint64_t remote_offset,
                       size_t size, const char* what, Channel** channel, OfiRmaRequest** out);
  // Splits `size` into at most kMaxChunks provider operations.
  bool plan_chunks(OfiRmaRequest& request, size_t size, const char* what);
  // Queues the request behind its channel's and posts what may go.
  Request* submit(Channel& channel, OfiRmaRequest* request);
  void pump(Channel& channel);
  // -FI_EAGAIN: the provider's queue is full, try again later.
  ssize_t post_next(OfiRmaRequest& request);
  void recycle(OfiRmaRequest* request);
  void fail_op(OfiRmaRequest& request, int count, const char* call, ssize_t rc);

  OfiRmaComm& comm_;
  Endpoint& endpoint_;
  int contexts_;
  int ranks_;
  int rank_stride_;
  std::unique_ptr<Channel[]> channels_;  // [context * ranks + rank]
  std::vector<Channel*> blocked_;        // channels with waiting requests
  std::mutex mutex_;
  static constexpr size_t kMaxRequests = 32768;
  RequestPool<OfiRmaRequest, kMaxRequests, 32> pool_;
  // A signal's operand, one per request (by pool index): registered once,
  // for providers that want descriptors for local buffers (FI_MR_LOCAL).
  // Four words each: a signal message (32 bytes) where there are no atomics.
  static constexpr size_t kOperandWords = 4;
  std::unique_ptr<uint64_t[]> operands_;
  void* operands_region_ = nullptr;
  void* operands_descriptor_ = nullptr;
  std::atomic<bool> failed_{false};
};

}  // namespace weft::ofi
