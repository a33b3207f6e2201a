#include "ofi/rma_context.h"

#include <rdma/fi_errno.h>

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "core/rma_record.h"
#include "ofi/memory_region.h"
#include "ofi/tag_layout.h"
#include "weft/log.h"

namespace weft::ofi {

OfiRmaRequest::OfiRmaRequest() {
  for (int i = 0; i <= kMaxChunks; ++i) {
    ops_[i].target = this;
    ops_[i].slot = static_cast<uint32_t>(i);
  }
}

void OfiRmaRequest::settle(int count) {
  pending_.fetch_sub(count, std::memory_order_acq_rel);
}

void OfiRmaRequest::on_complete(uint32_t, size_t, const uint64_t*) {
  inflight_->fetch_sub(1, std::memory_order_acq_rel);
  settle(1);
}

void OfiRmaRequest::on_error(uint32_t slot, int error, size_t, const char* text) {
  int expected = 0;
  if (error_.compare_exchange_strong(expected, error == 0 ? FI_EIO : error)) {
    const char* what = slot == static_cast<uint32_t>(kMaxChunks) ? "signal"
                       : kind_ == Kind::Get                      ? "get"
                                                                 : "put";
    std::snprintf(error_text_, sizeof(error_text_), "%s of %zu bytes %s rank %u failed: %s", what,
                  size_, kind_ == Kind::Get ? "from" : "to", rank_,
                  text != nullptr ? text : fi_strerror(error));
  }
  owner_->failed_.store(true, std::memory_order_relaxed);
  inflight_->fetch_sub(1, std::memory_order_acq_rel);
  settle(1);
}

ncclResult_t OfiRmaRequest::test(int* done, int*) {
  *done = 0;
  if (!finished()) {
    if (ncclResult_t result = owner_->progress(); result != ncclSuccess) return result;
    if (!finished()) return ncclSuccess;
  }
  OfiRmaContext* owner = owner_;
  if (error_.load(std::memory_order_relaxed) != 0) {
    WEFT_WARN("%s: %s", owner->comm_.device_name().c_str(), error_text_);
    owner->recycle(this);
    return ncclRemoteError;
  }
  *done = 1;
  owner->recycle(this);
  return ncclSuccess;
}

OfiRmaContext::OfiRmaContext(OfiRmaComm& comm, const RmaContextConfig& config)
    : comm_(comm),
      endpoint_(comm.endpoint()),
      contexts_(config.contexts),
      ranks_(comm.rank_count()),
      rank_stride_(config.rank_stride),
      channels_(new Channel[static_cast<size_t>(config.contexts) * comm.rank_count()]) {
  blocked_.reserve(static_cast<size_t>(contexts_) * ranks_);
}

OfiRmaContext::~OfiRmaContext() {
  if (operands_region_ != nullptr) {
    deregister_memory(&endpoint_, endpoint_.device_name(), operands_region_);
  }
}

ncclResult_t OfiRmaContext::open() {
  operands_ = std::make_unique<uint64_t[]>(kMaxRequests * kOperandWords);
  ncclResult_t result =
      register_memory(endpoint_, operands_.get(), kMaxRequests * kOperandWords * sizeof(uint64_t),
                      MemorySource{}, &operands_region_);
  operands_descriptor_ = descriptor_of(operands_region_);
  return result;
}

OfiRmaContext::Channel* OfiRmaContext::channel_for(int context, uint32_t rank, const char* what) {
  if (context < 0 || context >= contexts_) {
    WEFT_WARN("%s: context %d outside this block's 0..%d", what, context, contexts_ - 1);
    return nullptr;
  }
  if (rank >= static_cast<uint32_t>(ranks_)) {
    WEFT_WARN("%s: rank %u outside the comm's 0..%d", what, rank, ranks_ - 1);
    return nullptr;
  }
  int distance = static_cast<int>(rank) - comm_.rank();
  if (distance % rank_stride_ != 0) {
    WEFT_WARN("%s: rank %u is not reachable from rank %d with this block's rank stride %d", what,
              rank, comm_.rank(), rank_stride_);
    return nullptr;
  }
  return &channels_[static_cast<size_t>(context) * ranks_ + rank];
}

OfiRmaRequest* OfiRmaContext::start(Channel& channel, OfiRmaRequest::Kind kind, uint32_t rank,
                                    const char* what) {
  OfiRmaRequest* request = pool_.acquire();
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
  request->error_.store(0, std::memory_order_relaxed);
  return request;
}

bool OfiRmaContext::plan_chunks(OfiRmaRequest& request, size_t size, const char* what) {
  request.size_ = size;
  if (size == 0) return true;
  size_t limit = std::max<size_t>(endpoint_.max_write_size(), 1);
  size_t chunk = std::min(size, limit);
  size_t chunks = (size + chunk - 1) / chunk;
  if (chunks > static_cast<size_t>(OfiRmaRequest::kMaxChunks)) {
    chunk = (size + OfiRmaRequest::kMaxChunks - 1) / OfiRmaRequest::kMaxChunks;
    if (chunk > limit) {
      WEFT_WARN("%s: %zu bytes is more than %d operations of the provider's %zu-byte limit", what,
                size, OfiRmaRequest::kMaxChunks, limit);
      return false;
    }
    chunks = (size + chunk - 1) / chunk;
  }
  request.chunk_ = chunk;
  request.chunks_ = static_cast<int>(chunks);
  return true;
}

ncclResult_t OfiRmaContext::prepare(OfiRmaRequest::Kind kind, int context, uint32_t rank,
                                    void* local_region, uint64_t local_offset, void* remote_region,
                                    uint64_t remote_offset, size_t size, const char* what,
                                    Channel** channel, OfiRmaRequest** out) {
  *channel = channel_for(context, rank, what);
  if (*channel == nullptr) return ncclInvalidArgument;
  const OfiRmaRegion* local = nullptr;
  const OfiRmaRegion* remote = nullptr;
  if (size > 0) {
    local = comm_.region_of(local_region, what);
    remote = comm_.region_of(remote_region, what);
    if (local == nullptr || remote == nullptr) return ncclInvalidArgument;
    const RmaWindow& window = remote->windows[rank];
    if (local_offset > local->size || size > local->size - local_offset ||
        remote_offset > window.size || size > window.size - remote_offset) {
      WEFT_WARN(
          "%s: bytes %llu..+%zu of this rank's %zu-byte region or %llu..+%zu of rank %u's "
          "%llu-byte region are outside them",
          what, static_cast<unsigned long long>(local_offset), size, local->size,
          static_cast<unsigned long long>(remote_offset), size, rank,
          static_cast<unsigned long long>(window.size));
      return ncclInvalidArgument;
    }
  }
  OfiRmaRequest* started = start(**channel, kind, rank, what);
  if (started == nullptr) return ncclSystemError;
  if (!plan_chunks(*started, size, what)) {
    pool_.release(started);
    return ncclInvalidArgument;
  }
  if (size > 0) {
    started->local_ = local->base + local_offset;
    started->descriptor_ = local->descriptor;
    started->remote_ = remote->windows[rank].address + remote_offset;
    started->key_ = remote->windows[rank].key;
  }
  *out = started;
  return ncclSuccess;
}

ncclResult_t OfiRmaContext::put(int context, uint64_t src_offset, void* src_region, size_t size,
                                uint64_t dst_offset, void* dst_region, uint32_t rank,
                                const SignalSpec* signal, Request** request) {
  const char* what = signal != nullptr ? "iputSignal" : "iput";
  *request = nullptr;
  std::lock_guard<std::mutex> lock(mutex_);
  if (channel_for(context, rank, what) == nullptr) return ncclInvalidArgument;
  const OfiRmaRegion* signal_region = nullptr;
  if (signal != nullptr) {
    signal_region = comm_.region_of(signal->region, what);
    if (signal_region == nullptr) return ncclInvalidArgument;
    uint64_t limit = signal_region->windows[rank].size;
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
  OfiRmaRequest* started = nullptr;
  ncclResult_t result = prepare(OfiRmaRequest::Kind::Put, context, rank, src_region, src_offset,
                                dst_region, dst_offset, size, what, &channel, &started);
  if (result != ncclSuccess) return result;
  if (signal != nullptr) {
    started->signal_ = true;
    started->operand_ = &operands_[kOperandWords * pool_.index_of(started)];
    if (comm_.signals_by_message()) {
      RmaSignal message;
      message.region = signal_region->id;
      message.sender = static_cast<uint32_t>(comm_.rank());
      message.offset = signal->offset;
      message.value = signal->value;
      encode_rma_signal(message, reinterpret_cast<uint8_t*>(started->operand_));
    } else {
      *started->operand_ = signal->value;
    }
    started->signal_remote_ = signal_region->windows[rank].address + signal->offset;
    started->signal_key_ = signal_region->windows[rank].key;
  }
  *request = submit(*channel, started);
  return ncclSuccess;
}

ncclResult_t OfiRmaContext::get(int context, uint64_t remote_offset, void* remote_region,
                                size_t size, uint64_t local_offset, void* local_region,
                                uint32_t rank, Request** request) {
  *request = nullptr;
  std::lock_guard<std::mutex> lock(mutex_);
  Channel* channel = nullptr;
  OfiRmaRequest* started = nullptr;
  ncclResult_t result = prepare(OfiRmaRequest::Kind::Get, context, rank, local_region, local_offset,
                                remote_region, remote_offset, size, "iget", &channel, &started);
  if (result != ncclSuccess) return result;
  *request = submit(*channel, started);
  return ncclSuccess;
}

ncclResult_t OfiRmaContext::flush(int context, uint32_t rank, Request** request) {
  *request = nullptr;
  std::lock_guard<std::mutex> lock(mutex_);
  Channel* channel = channel_for(context, rank, "iflush");
  if (channel == nullptr) return ncclInvalidArgument;
  // A read's completion means its data is in memory: only what is still
  // on its way needs waiting for.
  if (channel->waiting.empty() && channel->inflight.load(std::memory_order_acquire) == 0) {
    return ncclSuccess;
  }
  OfiRmaRequest* started = start(*channel, OfiRmaRequest::Kind::Fence, rank, "iflush");
  if (started == nullptr) return ncclSystemError;
  *request = submit(*channel, started);
  return ncclSuccess;
}

Request* OfiRmaContext::submit(Channel& channel, OfiRmaRequest* request) {
  int operations = request->kind_ == OfiRmaRequest::Kind::Fence
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

void OfiRmaContext::pump(Channel& channel) {
  while (!channel.waiting.empty()) {
    OfiRmaRequest& request = *channel.waiting.front();
    bool drained = channel.inflight.load(std::memory_order_acquire) == 0;
    if (request.kind_ == OfiRmaRequest::Kind::Fence) {
      if (!drained) return;
      channel.waiting.pop();
      request.settle(1);
      continue;
    }
    while (request.posted_ < request.chunks_) {
      ssize_t rc = post_next(request);
      if (rc == -FI_EAGAIN) return;
      if (rc != 0) break;  // the request failed: nothing more of it goes
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
      } else if (post_next(request) == -FI_EAGAIN) {
        return;
      }
    }
    channel.waiting.pop();
  }
}

ssize_t OfiRmaContext::post_next(OfiRmaRequest& request) {
  request.inflight_->fetch_add(1, std::memory_order_acq_rel);
  const RmaPeer& peer = comm_.peer(request.rank_);
  ssize_t rc;
  const char* call;
  if (request.posted_ < request.chunks_) {
    size_t offset = request.chunk_ * static_cast<size_t>(request.posted_);
    size_t length = std::min(request.chunk_, request.size_ - offset);
    OpContext* op = &request.ops_[request.posted_];
    if (request.kind_ == OfiRmaRequest::Kind::Get) {
      call = "fi_read";
      rc = endpoint_.rma_read(request.local_ + offset, length, request.descriptor_, peer.address,
                              request.remote_ + offset, request.key_, op);
    } else {
      call = "fi_writemsg";
      rc = endpoint_.rma_write(request.local_ + offset, length, request.descriptor_, peer.address,
                               request.remote_ + offset, request.key_, op);
    }
    if (rc == 0) {
      ++request.posted_;
      return 0;
    }
    if (rc != -FI_EAGAIN) {
      fail_op(request, request.chunks_ - request.posted_ + (request.signal_ ? 1 : 0), call, rc);
      request.posted_ = request.chunks_;
      request.signal_posted_ = true;
    }
  } else {
    OpContext* op = &request.ops_[OfiRmaRequest::kMaxChunks];
    if (comm_.signals_by_message()) {
      call = "fi_tsend";
      rc = endpoint_.send(request.operand_, kRmaSignalSize, operands_descriptor_, peer.address,
                          rma_signal_tag(peer.id), op);
    } else {
      call = "fi_atomicmsg";
      rc = endpoint_.atomic_add(request.operand_, operands_descriptor_, peer.address,
                                request.signal_remote_, request.signal_key_, op);
    }
    if (rc == 0) {
      request.signal_posted_ = true;
      return 0;
    }
    if (rc != -FI_EAGAIN) {
      fail_op(request, 1, call, rc);
      request.signal_posted_ = true;
    }
  }
  request.inflight_->fetch_sub(1, std::memory_order_acq_rel);
  return rc;
}

void OfiRmaContext::fail_op(OfiRmaRequest& request, int count, const char* call, ssize_t rc) {
  int expected = 0;
  if (request.error_.compare_exchange_strong(expected, static_cast<int>(-rc))) {
    std::snprintf(request.error_text_, sizeof(request.error_text_),
                  "%s of %zu bytes %s rank %u: %s failed: %s",
                  request.kind_ == OfiRmaRequest::Kind::Get ? "get" : "put", request.size_,
                  request.kind_ == OfiRmaRequest::Kind::Get ? "from" : "to", request.rank_, call,
                  fi_strerror(static_cast<int>(-rc)));
  }
  failed_.store(true, std::memory_order_relaxed);
  request.settle(count);
}

ncclResult_t OfiRmaContext::progress() {
  ncclResult_t result = comm_.progress();
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

void OfiRmaContext::recycle(OfiRmaRequest* request) {
  std::lock_guard<std::mutex> lock(mutex_);
  pool_.release(request);
}

bool OfiRmaContext::busy() {
  std::lock_guard<std::mutex> lock(mutex_);
  return pool_.any_in_use([](OfiRmaRequest& request) { return !request.finished(); });
}

}  // namespace weft::ofi
