// A block of one-sided contexts, whatever the transport. Each (context,
// rank) pair is a channel: its operations are posted in the order NCCL
// issued them, and a signal is posted only once every earlier operation of
// its channel completed. The transport's writes complete only when their
// data is visible at the target (libfabric: FI_DELIVERY_COMPLETE where
// writes are not ordered; verbs: the RC acknowledgement), so the signal, a
// remote 64-bit add or a message the target applies, can never be seen
// before the data it covers, on fabrics that reorder (EFA's SRD) as on
// those that do not. Strong and weak signals both get that order.
//
// No allocation on the data path: requests come from a pool, a channel's
// queue of waiting requests is a ring that grows only past its high-water
// mark. The block's lock is uncontended (NCCL drives a block from one
// thread); completions may arrive on any thread polling the transport and
// touch only atomics.
//
// `Op` is the transport's per-operation context (libfabric's, with its
// provider space; verbs' wr_id target): it has `target` and `slot`.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/completion_target.h"
#include "core/request_pool.h"
#include "core/ring_queue.h"
#include "core/symmetric_comm.h"
#include "weft/log.h"

namespace weft {

// What a transport does for a block: post one operation, make progress.
template <class Op>
class RmaWire {
 public:
  enum class Posted { Done, Busy, Failed };  // Busy: the queue is full, try again later
  // Four words of registered memory per request: a signal's operand, or
  // its message (kRmaSignalSize bytes) where there are no remote atomics.
  static constexpr size_t kOperandWords = 4;

  virtual ~RmaWire() = default;
  virtual size_t max_operation_bytes() const = 0;
  virtual Posted write(uint32_t rank, uint8_t* local, size_t length, void* descriptor,
                       uint64_t remote, uint64_t key, Op* op, std::string* error) = 0;
  virtual Posted read(uint32_t rank, uint8_t* local, size_t length, void* descriptor,
                      uint64_t remote, uint64_t key, Op* op, std::string* error) = 0;
  // The signal: `operand` holds the value (remote atomics), or the encoded
  // RmaSignal message (signals_by_message()).
  virtual Posted signal(uint32_t rank, uint64_t* operand, void* operand_descriptor, uint64_t remote,
                        uint64_t key, Op* op, std::string* error) = 0;
  virtual bool signals_by_message() const = 0;
  virtual ncclResult_t register_operands(void* data, size_t size, void** region,
                                         void** descriptor) = 0;
  virtual void deregister_operands(void* region) = 0;
  // The comm's progress (completions, signal messages).
  virtual ncclResult_t progress() = 0;
};

template <class Op>
class RmaBlock;

template <class Op>
class RmaBlockRequest final : public Request, public CompletionTarget {
 public:
  static constexpr int kMaxChunks = 16;
  enum class Kind : uint8_t { Put, Get, Fence };

  RmaBlockRequest() {
    for (int i = 0; i <= kMaxChunks; ++i) {
      ops_[i].target = this;
      ops_[i].slot = static_cast<uint32_t>(i);
    }
  }

  ncclResult_t test(int* done, int*) override {
    *done = 0;
    if (!finished()) {
      if (ncclResult_t result = owner_->progress(); result != ncclSuccess) return result;
      if (!finished()) return ncclSuccess;
    }
    RmaBlock<Op>* owner = owner_;
    if (error_.load(std::memory_order_relaxed) != 0) {
      WEFT_WARN("%s: %s", owner->comm_.device_name().c_str(), error_text_);
      owner->recycle(this);
      return ncclRemoteError;
    }
    *done = 1;
    owner->recycle(this);
    return ncclSuccess;
  }

  void on_complete(uint32_t, size_t, const uint64_t*) override {
    inflight_->fetch_sub(1, std::memory_order_acq_rel);
    settle(1);
  }

  void on_error(uint32_t slot, int error, size_t, const char* text) override {
    const char* what = slot == static_cast<uint32_t>(kMaxChunks) ? "signal"
                       : kind_ == Kind::Get                      ? "get"
                                                                 : "put";
    record_error(error == 0 ? EIO : error, what, text != nullptr ? text : std::strerror(error));
    owner_->failed_.store(true, std::memory_order_relaxed);
    inflight_->fetch_sub(1, std::memory_order_acq_rel);
    settle(1);
  }

 private:
  friend class RmaBlock<Op>;
  bool finished() const { return pending_.load(std::memory_order_acquire) == 0; }
  // One operation fewer to wait for (completed, failed, or never posted).
  void settle(int count) { pending_.fetch_sub(count, std::memory_order_acq_rel); }
  void record_error(int error, const char* what, const char* text) {
    int expected = 0;
    if (!error_.compare_exchange_strong(expected, error)) return;
    std::snprintf(error_text_, sizeof(error_text_), "%s of %zu bytes %s rank %u failed: %s", what,
                  size_, kind_ == Kind::Get ? "from" : "to", rank_, text);
  }

  RmaBlock<Op>* owner_ = nullptr;
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
  // Its slot in the block's registered operands.
  uint64_t* operand_ = nullptr;
  uint64_t signal_remote_ = 0;
  uint64_t signal_key_ = 0;
  // What the target rank's windows are looked up from when the request is
  // first posted (they may arrive only then: windows on demand).
  const RmaRegion* remote_region_ = nullptr;
  uint64_t remote_offset_ = 0;
  const RmaRegion* signal_region_ = nullptr;
  uint64_t signal_offset_ = 0;
  bool resolved_ = false;
  std::atomic<int> pending_{0};
  std::atomic<int> error_{0};
  char error_text_[200] = {};
  Op ops_[kMaxChunks + 1];
};

template <class Op>
class RmaBlock final : public RmaBlockBase {
 public:
  using Wire = RmaWire<Op>;
  using BlockRequest = RmaBlockRequest<Op>;

  RmaBlock(SymmetricComm& comm, Wire& wire, const RmaContextConfig& config)
      : comm_(comm),
        wire_(wire),
        contexts_(config.contexts),
        ranks_(comm.rank_count()),
        rank_stride_(config.listed_peers ? 0 : config.rank_stride),
        reachable_(static_cast<size_t>(comm.rank_count()), config.listed_peers ? 0 : 1),
        channels_(new Channel[static_cast<size_t>(config.contexts) * comm.rank_count()]) {
    blocked_.reserve(static_cast<size_t>(contexts_) * ranks_);
    for (int r = 0; r < ranks_; ++r) {
      if (rank_stride_ > 0 && (r - comm.rank()) % rank_stride_ != 0) reachable_[r] = 0;
    }
    for (int peer : config.peers) reachable_[static_cast<size_t>(peer)] = 1;
  }
  ~RmaBlock() override {
    if (operands_region_ != nullptr) wire_.deregister_operands(operands_region_);
  }

  // Registers the signals' operands.
  ncclResult_t open() {
    operands_ = std::make_unique<uint64_t[]>(kMaxRequests * Wire::kOperandWords);
    return wire_.register_operands(operands_.get(),
                                   kMaxRequests * Wire::kOperandWords * sizeof(uint64_t),
                                   &operands_region_, &operands_descriptor_);
  }

  ncclResult_t put(int context, uint64_t src_offset, void* src_region, size_t size,
                   uint64_t dst_offset, void* dst_region, uint32_t rank, const SignalSpec* signal,
                   Request** request) override {
    const char* what = signal != nullptr ? "iputSignal" : "iput";
    *request = nullptr;
    std::lock_guard<std::mutex> lock(mutex_);
    const RmaRegion* signal_region = nullptr;
    if (signal != nullptr) {
      if (channel_for(context, rank, what) == nullptr) return ncclInvalidArgument;
      signal_region = comm_.region_of(signal->region, what);
      if (signal_region == nullptr) return ncclInvalidArgument;
      uint64_t limit = comm_.size_for_checks(*signal_region, rank);
      if (signal->offset % 8 != 0 || signal->offset > limit || limit - signal->offset < 8) {
        WEFT_WARN(
            "%s: signal offset %llu is not an aligned 64-bit word of rank %u's %llu-byte "
            "signal region",
            what, static_cast<unsigned long long>(signal->offset), rank,
            static_cast<unsigned long long>(limit));
        return ncclInvalidArgument;
      }
    }
    Channel* channel = nullptr;
    BlockRequest* started = nullptr;
    ncclResult_t result = prepare(BlockRequest::Kind::Put, context, rank, src_region, src_offset,
                                  dst_region, dst_offset, size, what, &channel, &started);
    if (result != ncclSuccess) return result;
    if (signal != nullptr) {
      started->signal_ = true;
      started->operand_ = &operands_[Wire::kOperandWords * pool_.index_of(started)];
      if (wire_.signals_by_message()) {
        RmaSignal message;
        message.region = signal_region->id;
        message.sender = static_cast<uint32_t>(comm_.rank());
        message.offset = signal->offset;
        message.value = signal->value;
        encode_rma_signal(message, reinterpret_cast<uint8_t*>(started->operand_));
      } else {
        *started->operand_ = signal->value;
      }
      started->signal_region_ = signal_region;
      started->signal_offset_ = signal->offset;
    }
    *request = submit(*channel, started);
    return ncclSuccess;
  }

  ncclResult_t get(int context, uint64_t remote_offset, void* remote_region, size_t size,
                   uint64_t local_offset, void* local_region, uint32_t rank,
                   Request** request) override {
    *request = nullptr;
    std::lock_guard<std::mutex> lock(mutex_);
    Channel* channel = nullptr;
    BlockRequest* started = nullptr;
    ncclResult_t result =
        prepare(BlockRequest::Kind::Get, context, rank, local_region, local_offset, remote_region,
                remote_offset, size, "iget", &channel, &started);
    if (result != ncclSuccess) return result;
    *request = submit(*channel, started);
    return ncclSuccess;
  }

  ncclResult_t flush(int context, uint32_t rank, Request** request) override {
    *request = nullptr;
    std::lock_guard<std::mutex> lock(mutex_);
    Channel* channel = channel_for(context, rank, "iflush");
    if (channel == nullptr) return ncclInvalidArgument;
    // A read's completion means its data is in memory: only what is still
    // on its way needs waiting for.
    if (channel->waiting.empty() && channel->inflight.load(std::memory_order_acquire) == 0) {
      return ncclSuccess;
    }
    BlockRequest* started = start(*channel, BlockRequest::Kind::Fence, rank, "iflush");
    if (started == nullptr) return ncclSystemError;
    *request = submit(*channel, started);
    return ncclSuccess;
  }

  ncclResult_t progress() override {
    ncclResult_t result = wire_.progress();
    std::lock_guard<std::mutex> lock(mutex_);
    for (size_t i = 0; i < blocked_.size();) {
      Channel* channel = blocked_[i];
      pump(*channel);
      if (channel->waiting.empty()) {
        channel->listed = false;
        blocked_[i] = blocked_.back();
        blocked_.pop_back();
      } else {
        ++i;
      }
    }
    return result;
  }

  bool failed() const override { return failed_.load(std::memory_order_relaxed); }

  bool busy() override {
    std::lock_guard<std::mutex> lock(mutex_);
    return pool_.any_in_use([](BlockRequest& request) { return !request.finished(); });
  }

 private:
  friend class RmaBlockRequest<Op>;
  // One (context, rank) pair.
  struct Channel {
    std::atomic<uint32_t> inflight{0};  // posted, not completed
    RingQueue<BlockRequest*> waiting;   // not wholly posted, in issue order
    bool listed = false;                // in blocked_
  };

  // Validates the common arguments; null on error (logged).
  Channel* channel_for(int context, uint32_t rank, const char* what) {
    if (context < 0 || context >= contexts_) {
      WEFT_WARN("%s: context %d outside this block's 0..%d", what, context, contexts_ - 1);
      return nullptr;
    }
    if (rank >= static_cast<uint32_t>(ranks_)) {
      WEFT_WARN("%s: rank %u outside the comm's 0..%d", what, rank, ranks_ - 1);
      return nullptr;
    }
    if (!reachable_[rank]) {
      if (rank_stride_ > 0) {
        WEFT_WARN("%s: rank %u is not reachable from rank %d with this block's rank stride %d",
                  what, rank, comm_.rank(), rank_stride_);
      } else {
        WEFT_WARN("%s: rank %u is not among this block's peers", what, rank);
      }
      return nullptr;
    }
    return &channels_[static_cast<size_t>(context) * ranks_ + rank];
  }

  // A fresh request for `channel`, or null (logged) when the pool is spent.
  BlockRequest* start(Channel& channel, typename BlockRequest::Kind kind, uint32_t rank,
                      const char* what) {
    BlockRequest* request = pool_.acquire();
    if (request == nullptr) {
      WEFT_WARN("%s: more than %zu operations in flight on one context block", what,
                pool_.allocated());
      return nullptr;
    }
    request->owner_ = this;
    request->inflight_ = &channel.inflight;
    request->kind_ = kind;
    request->rank_ = rank;
    request->local_ = nullptr;
    request->descriptor_ = nullptr;
    request->remote_ = request->key_ = 0;
    request->size_ = request->chunk_ = 0;
    request->chunks_ = request->posted_ = 0;
    request->signal_ = request->signal_posted_ = false;
    request->remote_region_ = request->signal_region_ = nullptr;
    request->remote_offset_ = request->signal_offset_ = 0;
    request->resolved_ = false;
    request->error_.store(0, std::memory_order_relaxed);
    return request;
  }

  // Splits `size` into at most kMaxChunks operations.
  bool plan_chunks(BlockRequest& request, size_t size, const char* what) {
    request.size_ = size;
    if (size == 0) return true;
    size_t limit = std::max<size_t>(wire_.max_operation_bytes(), 1);
    size_t chunk = std::min(size, limit);
    size_t chunks = (size + chunk - 1) / chunk;
    if (chunks > static_cast<size_t>(BlockRequest::kMaxChunks)) {
      chunk = (size + BlockRequest::kMaxChunks - 1) / BlockRequest::kMaxChunks;
      if (chunk > limit) {
        WEFT_WARN("%s: %zu bytes is more than %d operations of the device's %zu-byte limit", what,
                  size, BlockRequest::kMaxChunks, limit);
        return false;
      }
      chunks = (size + chunk - 1) / chunk;
    }
    request.chunk_ = chunk;
    request.chunks_ = static_cast<int>(chunks);
    return true;
  }

  // Validates a put's or get's arguments and starts its request.
  ncclResult_t prepare(typename BlockRequest::Kind kind, int context, uint32_t rank,
                       void* local_region, uint64_t local_offset, void* remote_region,
                       uint64_t remote_offset, size_t size, const char* what, Channel** channel,
                       BlockRequest** out) {
    *channel = channel_for(context, rank, what);
    if (*channel == nullptr) return ncclInvalidArgument;
    const RmaRegion* local = nullptr;
    const RmaRegion* remote = nullptr;
    if (size > 0) {
      local = comm_.region_of(local_region, what);
      remote = comm_.region_of(remote_region, what);
      if (local == nullptr || remote == nullptr) return ncclInvalidArgument;
      const uint64_t remote_size = comm_.size_for_checks(*remote, rank);
      if (local_offset > local->size || size > local->size - local_offset ||
          remote_offset > remote_size || size > remote_size - remote_offset) {
        WEFT_WARN(
            "%s: bytes %llu..+%zu of this rank's %zu-byte region or %llu..+%zu of rank %u's "
            "%llu-byte region are outside them",
            what, static_cast<unsigned long long>(local_offset), size, local->size,
            static_cast<unsigned long long>(remote_offset), size, rank,
            static_cast<unsigned long long>(remote_size));
        return ncclInvalidArgument;
      }
    }
    BlockRequest* started = start(**channel, kind, rank, what);
    if (started == nullptr) return ncclSystemError;
    if (!plan_chunks(*started, size, what)) {
      pool_.release(started);
      return ncclInvalidArgument;
    }
    if (size > 0) {
      started->local_ = local->base + local_offset;
      started->descriptor_ = local->descriptor;
      started->remote_region_ = remote;
      started->remote_offset_ = remote_offset;
    }
    *out = started;
    return ncclSuccess;
  }

  // Queues the request behind its channel's and posts what may go.
  Request* submit(Channel& channel, BlockRequest* request) {
    int operations = request->kind_ == BlockRequest::Kind::Fence
                         ? 1
                         : request->chunks_ + (request->signal_ ? 1 : 0);
    request->pending_.store(operations, std::memory_order_relaxed);
    if (operations == 0) return request;  // a put of nothing: done already
    channel.waiting.push(request);
    pump(channel);
    if (!channel.waiting.empty() && !channel.listed) {
      channel.listed = true;
      blocked_.push_back(&channel);
    }
    return request;
  }

  void pump(Channel& channel) {
    while (!channel.waiting.empty()) {
      BlockRequest& request = *channel.waiting.front();
      bool drained = channel.inflight.load(std::memory_order_acquire) == 0;
      if (request.kind_ == BlockRequest::Kind::Fence) {
        if (!drained) return;
        channel.waiting.pop();
        request.settle(1);
        continue;
      }
      if (!request.resolved_) {
        Resolved resolved = resolve(request);
        if (resolved == Resolved::Waiting) return;
        if (resolved == Resolved::Failed) {
          channel.waiting.pop();
          continue;
        }
      }
      while (request.posted_ < request.chunks_) {
        typename Wire::Posted posted = post_next(request);
        if (posted == Wire::Posted::Busy) return;
        if (posted == Wire::Posted::Failed) break;  // nothing more of it goes
      }
      if (request.posted_ < request.chunks_) {
        channel.waiting.pop();
        continue;
      }
      if (request.signal_ && !request.signal_posted_) {
        // Its data, and everything earlier on this channel, must be visible first.
        if (channel.inflight.load(std::memory_order_acquire) != 0) return;
        if (request.error_.load(std::memory_order_relaxed) != 0) {
          request.signal_posted_ = true;
          request.settle(1);  // the data failed: no signal for it
        } else if (post_next(request) == Wire::Posted::Busy) {
          return;
        }
      }
      channel.waiting.pop();
    }
  }

  enum class Resolved { Done, Waiting, Failed };

  // Where the target rank's copies of the request's regions are; a request
  // whose rank holds none, or too small a one, fails whole.
  Resolved resolve(BlockRequest& request) {
    std::string why;
    const RmaWindow* window = nullptr;
    auto lookup = [&](const RmaRegion& region, uint64_t offset, uint64_t length) {
      auto found = comm_.window_of(region, request.rank_, &window, &why);
      if (found == SymmetricComm::WindowLookup::Waiting) return Resolved::Waiting;
      if (found == SymmetricComm::WindowLookup::Missing) return Resolved::Failed;
      if (offset > window->size || length > window->size - offset) {
        why = "bytes " + std::to_string(offset) + "..+" + std::to_string(length) +
              " are outside rank " + std::to_string(request.rank_) + "'s " +
              std::to_string(window->size) + "-byte copy of the region";
        return Resolved::Failed;
      }
      return Resolved::Done;
    };
    Resolved resolved = Resolved::Done;
    if (request.size_ > 0) {
      resolved = lookup(*request.remote_region_, request.remote_offset_, request.size_);
      if (resolved == Resolved::Done) {
        request.remote_ = window->address + request.remote_offset_;
        request.key_ = window->key;
      }
    }
    if (resolved == Resolved::Done && request.signal_) {
      resolved = lookup(*request.signal_region_, request.signal_offset_, 8);
      if (resolved == Resolved::Done) {
        request.signal_remote_ = window->address + request.signal_offset_;
        request.signal_key_ = window->key;
      }
    }
    if (resolved == Resolved::Failed) {
      fail_op(request, request.chunks_ + (request.signal_ ? 1 : 0), why);
      request.posted_ = request.chunks_;
      request.signal_posted_ = true;
    }
    request.resolved_ = resolved == Resolved::Done;
    return resolved;
  }

  typename Wire::Posted post_next(BlockRequest& request) {
    request.inflight_->fetch_add(1, std::memory_order_acq_rel);
    std::string error;
    typename Wire::Posted posted;
    const bool data = request.posted_ < request.chunks_;
    if (data) {
      size_t offset = request.chunk_ * static_cast<size_t>(request.posted_);
      size_t length = std::min(request.chunk_, request.size_ - offset);
      Op* op = &request.ops_[request.posted_];
      posted =
          request.kind_ == BlockRequest::Kind::Get
              ? wire_.read(request.rank_, request.local_ + offset, length, request.descriptor_,
                           request.remote_ + offset, request.key_, op, &error)
              : wire_.write(request.rank_, request.local_ + offset, length, request.descriptor_,
                            request.remote_ + offset, request.key_, op, &error);
      if (posted == Wire::Posted::Done) {
        ++request.posted_;
        return posted;
      }
      if (posted == Wire::Posted::Failed) {
        fail_op(request, request.chunks_ - request.posted_ + (request.signal_ ? 1 : 0), error);
        request.posted_ = request.chunks_;
        request.signal_posted_ = true;
      }
    } else {
      posted = wire_.signal(request.rank_, request.operand_, operands_descriptor_,
                            request.signal_remote_, request.signal_key_,
                            &request.ops_[BlockRequest::kMaxChunks], &error);
      if (posted == Wire::Posted::Done) {
        request.signal_posted_ = true;
        return posted;
      }
      if (posted == Wire::Posted::Failed) {
        fail_op(request, 1, error);
        request.signal_posted_ = true;
      }
    }
    request.inflight_->fetch_sub(1, std::memory_order_acq_rel);
    return posted;
  }

  void fail_op(BlockRequest& request, int count, const std::string& error) {
    request.record_error(EIO, request.kind_ == BlockRequest::Kind::Get ? "get" : "put",
                         error.c_str());
    failed_.store(true, std::memory_order_relaxed);
    request.settle(count);
  }

  void recycle(BlockRequest* request) {
    std::lock_guard<std::mutex> lock(mutex_);
    pool_.release(request);
  }

  SymmetricComm& comm_;
  Wire& wire_;
  int contexts_;
  int ranks_;
  int rank_stride_;                      // 0: peers listed (RMA v17)
  std::vector<uint8_t> reachable_;       // by rank
  std::unique_ptr<Channel[]> channels_;  // [context * ranks + rank]
  std::vector<Channel*> blocked_;        // channels with waiting requests
  std::mutex mutex_;
  static constexpr size_t kMaxRequests = 32768;
  RequestPool<BlockRequest, kMaxRequests, 32> pool_;
  std::unique_ptr<uint64_t[]> operands_;
  void* operands_region_ = nullptr;
  void* operands_descriptor_ = nullptr;
  std::atomic<bool> failed_{false};
};

}  // namespace weft
