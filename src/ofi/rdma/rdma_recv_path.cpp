#include "ofi/rdma/rdma_recv_path.h"

#include <rdma/fi_errno.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>

#include "ofi/endpoint/completion_failure.h"
#include "ofi/endpoint/memory_region.h"
#include "ofi/endpoint/tag_layout.h"
#include "weft/log.h"

namespace weft::ofi {

namespace {

bool any_rail_without_write_lengths(const std::vector<Endpoint*>& rails) {
  for (Endpoint* rail : rails) {
    if (!rail->write_lengths_reported()) return true;
  }
  return false;
}

// The largest clear-to-send this connection encodes; a test that makes it
// claim one rail more needs room for it.
size_t cts_storage_size(size_t rails, WireMutation mutation) {
  if (mutation == WireMutation::kCtsRails) rails = std::min<size_t>(rails + 1, kMaxRails);
  return cts_size(kRdmaMaxEntries, static_cast<int>(rails));
}

}  // namespace

RdmaRecvPath::RdmaRecvPath(std::vector<Endpoint*> rails, PathPeer peer, size_t eager_size,
                           int bounce_count)
    : rails_(std::move(rails)),
      endpoint_(*rails_[0]),
      peer_(std::move(peer)),
      eager_size_(eager_size),
      // Aligned so every bounce's data starts on a cache line.
      bounce_stride_((kEagerHeaderSize + eager_size + 63) & ~size_t{63}),
      bounces_(new Bounce[static_cast<size_t>(bounce_count)]),
      bounce_count_(bounce_count),
      first_bounces_(std::min(bounce_count, kFirstBounces)),
      active_bounces_(first_bounces_),
      cts_stride_(cts_storage_size(rails_.size(), wire_mutation_of(rails_[0]->test_aids()))),
      needs_notices_(any_rail_without_write_lengths(rails_)) {
  const uint32_t window = eager_ahead(endpoint_.weft_matching());
  deferrable_entries_ = static_cast<int>(std::min<uint32_t>(kRdmaMaxEntries, window / 2));
  skip_limit_ = window - static_cast<uint32_t>(deferrable_entries_);
  // Under weft's matching eager data goes behind a header, in two iovecs:
  // without them the sender writes every message (the peer runs the same
  // provider, so our limit is its limit).
  eager_sendable_ = !endpoint_.weft_matching() || endpoint_.iov_limit() >= 2;
  for (int i = 0; i < bounce_count_; ++i) {
    bounces_[i].op.target = this;
    bounces_[i].op.slot = static_cast<uint32_t>(i);
    bounces_[i].copy_op.target = &copy_target_;
  }
  for (uint32_t i = 0; i < kRdmaSlots; ++i) {
    cts_sends_[i].op.target = &cts_target_;
    cts_sends_[i].op.slot = i;
  }
}

RdmaRecvPath::~RdmaRecvPath() {
  if (sink_attached_) endpoint_.detach_eager_sink(eager_tag(peer_.local_comm_id));
  WEFT_INFO(NCCL_NET,
            "%s: eager messages from %s: %llu placed from the message pool, %llu through "
            "bounce buffers",
            endpoint_.device_name().c_str(), peer_.name.c_str(),
            (unsigned long long)placed_from_pool_.load(std::memory_order_relaxed),
            (unsigned long long)placed_from_bounces_);
  for (size_t r = 0; r < rails_.size(); ++r) {
    if (write_targets_[r] != 0) rails_[r]->detach_write_target(write_targets_[r]);
  }
  for (void* region : bounce_regions_)
    deregister_memory(&endpoint_, endpoint_.device_name(), region);
}

ncclResult_t RdmaRecvPath::add_bounce_block(int block, int first, int last) {
  const size_t size = bounce_stride_ * static_cast<size_t>(last - first);
  // Not zeroed: only the provider writes it, and untouched pages cost no memory.
  bounce_blocks_[block].reset(new (std::nothrow) uint8_t[size]);
  if (!bounce_blocks_[block]) {
    WEFT_WARN("%s: no memory for %d eager receive buffers (%zu bytes)",
              endpoint_.device_name().c_str(), last - first, size);
    return ncclSystemError;
  }
  return register_memory(endpoint_, bounce_blocks_[block].get(), size, MemorySource{},
                         &bounce_regions_[block]);
}

void RdmaRecvPath::grow_bounces() {
  bounces_grown_ = true;
  if (add_bounce_block(1, first_bounces_, bounce_count_) != ncclSuccess) {
    // The comm goes on with the buffers it has; the provider queues the rest.
    WEFT_INFO(NCCL_NET, "%s: eager receives from %s stay at %d buffers",
              endpoint_.device_name().c_str(), peer_.name.c_str(), first_bounces_);
    bounce_blocks_[1].reset();
    return;
  }
  active_bounces_ = bounce_count_;  // kIdle: posted by service()
  // Once per comm at most.
  WEFT_INFO(NCCL_NET, "%s: eager receives from %s now use %d buffers (were %d, all full at once)",
            endpoint_.device_name().c_str(), peer_.name.c_str(), bounce_count_, first_bounces_);
}

ncclResult_t RdmaRecvPath::start() {
  ncclResult_t result = add_bounce_block(0, 0, first_bounces_);
  if (result != ncclSuccess) return result;
  for (size_t r = 0; r < rails_.size(); ++r) {
    write_targets_[r] = rails_[r]->attach_write_target(this);
    if (write_targets_[r] == 0) {
      WEFT_WARN("%s: more than 65535 receive comms on one device use the rdma protocol",
                rails_[r]->device_name().c_str());
      return ncclSystemError;
    }
  }
  for (int i = 0; i < active_bounces_; ++i) {
    result = post_bounce(i);
    if (result != ncclSuccess) return result;
  }
  // Before the ack: no eager message can have arrived yet.
  sink_attached_ = endpoint_.attach_eager_sink(eager_tag(peer_.local_comm_id), this);
  return ncclSuccess;
}

ncclResult_t RdmaRecvPath::post_bounce(int index) {
  Bounce& bounce = bounces_[index];
  bounce.length = 0;
  bounce.has_immediate = false;
  bounce.state.store(kPosted, std::memory_order_relaxed);
  ssize_t rc =
      endpoint_.receive(bounce_data(index), bounce_stride_, descriptor_of(bounce_region(index)),
                        eager_tag(peer_.local_comm_id), &bounce.op);
  if (rc == 0) return ncclSuccess;
  bounce.state.store(kIdle, std::memory_order_relaxed);
  // Posted again by a later progress; the provider queues what arrives meanwhile.
  if (rc == -FI_EAGAIN || rc == -FI_ENOMEM) return ncclSuccess;
  WEFT_WARN("%s: posting an eager receive buffer for %s failed: %s",
            endpoint_.device_name().c_str(), peer_.name.c_str(), fi_strerror((int)-rc));
  return ncclSystemError;
}

void RdmaRecvPath::fail(const std::string& problem) {
  fault_.raise(ncclRemoteError, endpoint_.device_name(), peer_.name, "protocol error: " + problem);
}

ncclResult_t RdmaRecvPath::poll_rails() {
  for (Endpoint* rail : rails_) {
    ncclResult_t result = rail->poll();
    if (result != ncclSuccess) return result;
  }
  return ncclSuccess;
}

ncclResult_t RdmaRecvPath::irecv(int n, void** data, const size_t* sizes, const int* tags,
                                 void** mhandles, Request** request) {
  *request = nullptr;
  ncclResult_t result = service(Repost::kLater);
  if (result != ncclSuccess) return result;
  for (int i = 0; i < n; ++i) {
    size_t size = sizes == nullptr ? 0 : sizes[i];
    void* mhandle = mhandles == nullptr ? nullptr : mhandles[i];
    auto* region = static_cast<const MemoryRegion*>(mhandle);
    if (size > 0 && (region == nullptr || region->magic != MemoryRegion::kMagic)) {
      WEFT_WARN(
          "%s: irecv of %zu bytes without a valid memory handle (the rdma protocol needs "
          "every receive buffer registered)",
          endpoint_.device_name().c_str(), size);
      return ncclInvalidArgument;
    }
    for (int r = 1; size > 0 && r < rails(); ++r) {
      if (region_on_rail(mhandle, r) == nullptr) {
        WEFT_WARN("%s: irecv buffer %p was registered before this comm had rail %d",
                  endpoint_.device_name().c_str(), data[i], r);
        return ncclInvalidArgument;
      }
    }
  }
  RdmaRecvRequest* req = pool_.acquire();
  if (req == nullptr) return poll_rails();
  const int s = slot_of(req);
  // A slot's first use (the pool grew): give it room for its state. Only
  // this thread allocates, so it looks without the lock first.
  if (Slot* known = slots_.find(static_cast<size_t>(s)); known == nullptr || !known->unsent_cts) {
    std::lock_guard<std::mutex> lock(state_mutex_);
    Slot* fresh = slots_.ensure(static_cast<size_t>(s));
    if (fresh != nullptr && !fresh->unsent_cts)
      fresh->unsent_cts.reset(new (std::nothrow) uint8_t[cts_stride_]);
    if (fresh == nullptr || !fresh->unsent_cts) {
      pool_.release(req);
      WEFT_WARN("%s: no memory for a receive's state", endpoint_.device_name().c_str());
      return ncclSystemError;
    }
  }
  req->start(this, n);
  // Encoded in place: irecv is on every message's path.
  uint8_t* cts = unsent_cts(s);
  const int rail_count = rails();
  encode_cts_header(cts, next_group_, next_index_, static_cast<uint8_t>(s), static_cast<uint8_t>(n),
                    static_cast<uint8_t>(rail_count));
  {
    std::lock_guard<std::mutex> lock(state_mutex_);
    Slot& slot = slot_at(s);
    slot.first_index = next_index_;
    slot.group_seq = next_group_;
    slot.count = n;
    slot.eager_entries = 0;
    for (int i = 0; i < n; ++i) {
      size_t size = sizes == nullptr ? 0 : sizes[i];
      auto* region = static_cast<const MemoryRegion*>(mhandles == nullptr ? nullptr : mhandles[i]);
      slot.entries[i] = Entry{};
      slot.entries[i].data = data[i];
      slot.entries[i].posted = size;
      slot.entries[i].region = size > 0 ? region : nullptr;
      slot.entries[i].tag = tags[i];
      req->set_posted_size(i, size);
      uint64_t address[kMaxRails];
      uint64_t key[kMaxRails];
      for (int r = 0; r < rail_count; ++r) {
        address[r] = 0;
        key[r] = 0;
        if (size == 0) continue;
        const MemoryRegion* on_rail = region_on_rail(region, r);
        address[r] = rails_[r]->remote_address(data[i], on_rail->registration());
        key[r] = on_rail->registration().key;
      }
      encode_cts_entry(cts, i, rail_count, size, tags[i], address, key);
    }
    slot.request = req;
    // With the slot: take() reads both under the lock.
    next_index_ += static_cast<uint32_t>(n);
    ++next_group_;
  }
  if (const TestAids* aids = endpoint_.test_aids();
      aids != nullptr && aids->wire_mutation != WireMutation::kNone) [[unlikely]] {
    CtsMessage message;
    std::string problem;
    decode_cts(cts, cts_size(n, rail_count), rail_count, &message, &problem);
    mutate_cts(aids->wire_mutation, &message);
    encode_cts(message, cts);
  }
  *request = req;
  // Messages up to the eager size with a tag the eager immediate holds go
  // eagerly and never wait for this clear-to-send (a larger one, which
  // would, is a truncation: resolve_unsent sends it after kStallTime).
  bool deferrable = eager_sendable_ && n <= deferrable_entries_;
  for (int i = 0; i < n; ++i) {
    deferrable =
        deferrable && (sizes == nullptr || sizes[i] <= eager_size_) && eager_tag_fits(tags[i]);
  }
  unsent_[unsent_tail_++ % kRdmaSlots] = static_cast<uint8_t>(s);
  // Eager messages for this group may have arrived before it was posted.
  result = service(Repost::kLater);
  if (result != ncclSuccess) return result;
  // Together with those held back before it.
  return resolve_unsent(deferrable ? Unsent::kFilledOnly : Unsent::kAll);
}

bool RdmaRecvPath::send_cts(int s) {
  RdmaRecvRequest* req = slot_at(s).request;
  const uint8_t* bytes = unsent_cts(s);
  const size_t cts_bytes = cts_size(bytes[5], rails());
  ssize_t rc;
  if (endpoint_.may_inject(cts_bytes)) {
    // No send completion to read back later: one completion fewer per receive.
    rc = endpoint_.inject(bytes, cts_bytes, peer_.address, cts_tag(peer_.remote_comm_id));
  } else {
    int b = 0;
    while (b < kRdmaSlots && cts_sends_[b].busy.load(std::memory_order_acquire)) ++b;
    if (b == kRdmaSlots) return false;  // all on their way: a later call
    ControlSendCopies& copies = endpoint_.control_copies();
    ControlSendCopies::Copy copy;
    const ControlSendCopies::Take taken = copies.take(&copy);
    if (taken == ControlSendCopies::Take::kNone) return false;  // the endpoint's are all out
    if (taken == ControlSendCopies::Take::kFailed) {
      cts_failed(req, FI_ENOMEM, "no registered memory for the clear-to-send");
      return true;
    }
    CtsSend& send = cts_sends_[b];
    std::memcpy(copy.bytes, bytes, cts_bytes);
    send.request_slot = s;
    send.group_seq = slot_at(s).group_seq;
    send.copy = copy.index;
    send.busy.store(true, std::memory_order_release);
    rc = endpoint_.send(copy.bytes, cts_bytes, copy.descriptor, peer_.address,
                        cts_tag(peer_.remote_comm_id), &send.op);
    if (rc != 0) {
      copies.give_back(copy.index);
      send.busy.store(false, std::memory_order_release);
    }
  }
  if (rc == 0) {
    req->cts_done();
    return true;
  }
  if (rc == -FI_EAGAIN) return false;
  WEFT_WARN("%s: sending the clear-to-send for %d receive(s) to %s failed: %s",
            endpoint_.device_name().c_str(), static_cast<int>(bytes[5]), peer_.name.c_str(),
            fi_strerror((int)-rc));
  // The receive fails in test(), naming the peer.
  cts_failed(req, static_cast<int>(-rc), "sending the clear-to-send failed");
  return true;
}

void RdmaRecvPath::CtsTarget::on_complete(uint32_t slot, size_t, const uint64_t*) {
  CtsSend& send = path->cts_sends_[slot];
  path->endpoint_.control_copies().give_back(send.copy);
  send.busy.store(false, std::memory_order_release);
}

void RdmaRecvPath::CtsTarget::on_error(uint32_t slot, int error, size_t, const char*) {
  CtsSend& send = path->cts_sends_[slot];
  // The provider is done with the copy either way.
  path->endpoint_.control_copies().give_back(send.copy);
  if (error == FI_ECANCELED) {  // closing
    send.busy.store(false, std::memory_order_release);
    return;
  }
  send.error = error;
  send.lost.store(true, std::memory_order_release);
  path->lost_cts_.fetch_add(1, std::memory_order_acq_rel);
}

void RdmaRecvPath::judge_lost_cts() {
  for (CtsSend& send : cts_sends_) {
    if (!send.lost.load(std::memory_order_acquire)) continue;
    bool needed = false;
    {
      std::lock_guard<std::mutex> lock(state_mutex_);
      const Slot& owner = slot_at(send.request_slot);
      if (owner.request != nullptr && owner.group_seq == send.group_seq) {
        for (int e = 0; e < owner.count; ++e) needed = needed || !owner.entries[e].claimed;
      }
    }
    const int error = send.error;
    send.lost.store(false, std::memory_order_relaxed);
    send.busy.store(false, std::memory_order_release);
    lost_cts_.fetch_sub(1, std::memory_order_acq_rel);
    if (needed) {
      fault_.raise(ncclRemoteError, endpoint_.device_name(), peer_.name,
                   std::string("a clear-to-send failed: ") + fi_strerror(error));
    } else {
      // Every receive of the group was filled (eagerly) or is being
      // written: the sender no longer needed it, and may have closed since.
      WEFT_INFO(NCCL_NET, "%s: a clear-to-send to %s failed (%s) after its receives were filled",
                endpoint_.device_name().c_str(), peer_.name.c_str(), fi_strerror(error));
    }
  }
}

bool RdmaRecvPath::filled_eagerly(int s) {
  // Counted by fill_entry and take(): no lock on every poll.
  const Slot* slot = slots_.find(static_cast<size_t>(s));
  return slot != nullptr && slot->eager_entries.load(std::memory_order_relaxed) == slot->count;
}

ncclResult_t RdmaRecvPath::resolve_unsent(Unsent which) {
  // A group whose sender may need its clear-to-send (a message larger than
  // its receive: an error) is not held back longer than this. Long enough
  // that a loaded machine's ping-pong does not send it.
  constexpr auto kStallTime = std::chrono::milliseconds(1);
  constexpr uint32_t kPollsPerClockRead = 256;
  while (unsent_head_ != unsent_tail_) {
    const int s = unsent_[unsent_head_ % kRdmaSlots];
    const uint32_t count = static_cast<uint32_t>(slot_at(s).count);
    const bool filled = filled_eagerly(s);
    if (filled && skipped_groups_ < kRdmaMaxSkipped && skipped_messages_ + count <= skip_limit_) {
      slot_at(s).request->cts_done();
      ++skipped_groups_;
      skipped_messages_ += count;
    } else {
      // Half the run the sender allows is skipped and the comm has nothing
      // else to do: this group's clear-to-send goes now, so that the run
      // rarely grows long enough for a call that places a message (on
      // that message's path) to have to send one.
      const bool idle_turn = which == Unsent::kIdle && (skipped_groups_ >= kRdmaMaxSkipped / 2 ||
                                                        skipped_messages_ >= skip_limit_ / 2);
      bool stalled = false;
      if (!filled && which != Unsent::kAll && !idle_turn) {
        if (++head_polls_ % kPollsPerClockRead != 0) return ncclSuccess;
        const auto now = std::chrono::steady_clock::now();
        if (head_polls_ == kPollsPerClockRead) head_since_ = now;
        stalled = now - head_since_ >= kStallTime;
        if (!stalled) return ncclSuccess;
      }
      set_cts_skipped(unsent_cts(s), skipped_groups_);
      if (!send_cts(s)) return poll_rails();  // the provider is full: later
      skipped_groups_ = 0;
      skipped_messages_ = 0;
    }
    ++unsent_head_;
    head_polls_ = 0;
  }
  return ncclSuccess;
}

bool RdmaRecvPath::place_eager(int index, ncclResult_t* result) {
  *result = ncclSuccess;
  Bounce& bounce = bounces_[index];
  const uint8_t* bytes = bounce_data(index);
  EagerImmediate immediate;
  std::string problem;
  // Under weft's matching the CQ data was the compact tag: a header follows.
  if (endpoint_.weft_matching()) {
    immediate.header_follows = true;
  } else if (!decode_eager_immediate(bounce.has_immediate ? &bounce.immediate : nullptr,
                                     next_index_, &immediate, &problem)) {
    fail(problem);
    *result = ncclRemoteError;
    return false;
  }
  if (!immediate.header_follows) {
    // Data alone: the immediate named index and tag.
    if (bounce.length > eager_size_) {
      fail("eager data of " + std::to_string(bounce.length) + " bytes exceeds the eager limit of " +
           std::to_string(eager_size_));
      *result = ncclRemoteError;
      return false;
    }
    return fill_entry(index, immediate.index, immediate.tag, bounce.length, false, bytes, result);
  }
  EagerHeader header;
  if (!decode_eager_header(bytes, bounce.length, eager_size_, &header, &problem)) {
    fail(problem);
    *result = ncclRemoteError;
    return false;
  }
  if (header.probe) return true;  // the sender checked rail 0: nothing to do
  if (header.aborted) {
    fault_.raise(ncclRemoteError, endpoint_.device_name(), peer_.name,
                 "the sender's write of message #" + std::to_string(header.index) +
                     " failed (a rail or the connection went down on its side)");
    *result = ncclRemoteError;
    return true;
  }
  if (header.size_notice) {
    {
      std::lock_guard<std::mutex> lock(state_mutex_);
      if (static_cast<int32_t>(header.index - next_index_) >= 0) return false;
    }
    take_size_notice(header);
    *result = fault_.result();
    return true;
  }
  return fill_entry(index, header.index, header.tag, header.size, header.truncated,
                    bytes + kEagerHeaderSize, result);
}

bool RdmaRecvPath::fill_entry(int index, uint32_t message, int32_t tag, uint64_t size,
                              bool truncated, const uint8_t* data, ncclResult_t* result) {
  Bounce& bounce = bounces_[index];
  RdmaRecvRequest* req = nullptr;
  int entry_index = -1;
  int slot_index = -1;
  bool copy_to_gpu = false;
  Entry* entry = nullptr;
  {
    std::lock_guard<std::mutex> lock(state_mutex_);
    switch (find_eager_entry(message, tag, &slot_index, &entry_index)) {
      case EagerLookup::kFound:
        break;
      case EagerLookup::kNotPosted:
        return false;  // kept until irecv covers its index
      case EagerLookup::kAhead:
        fail("eager message #" + std::to_string(message) + " is " +
             std::to_string(static_cast<int32_t>(message - next_index_)) +
             " messages ahead of the next receive to be posted (#" + std::to_string(next_index_) +
             "); a sender stays fewer than " + std::to_string(kRdmaEagerAhead) + " ahead");
        *result = ncclRemoteError;
        return false;
      case EagerLookup::kNoMatch:
        fail("eager message #" + std::to_string(message) + " with tag " + std::to_string(tag) +
             " matches no pending receive");
        *result = ncclRemoteError;
        return false;
    }
    Slot& owner = slot_at(slot_index);
    entry = &owner.entries[entry_index];
    req = owner.request;
    entry->claimed = true;
    entry->eager = true;
    owner.eager_entries.fetch_add(1, std::memory_order_relaxed);
    if (truncated || size > entry->posted) {
      char text[160];
      std::snprintf(text, sizeof(text),
                    "message truncated: the sender's %llu bytes exceed the %zu posted",
                    (unsigned long long)size, entry->posted);
      req->fail(static_cast<uint32_t>(entry_index), kTruncated,
                size > entry->posted ? size - entry->posted : 0, text);
      return true;
    }
    auto* region = static_cast<const MemoryRegion*>(entry->region);
    copy_to_gpu = size > 0 && region != nullptr && region->type == NCCL_PTR_CUDA;
    ++placed_from_bounces_;
    if (!copy_to_gpu) {
      if (size > 0) std::memcpy(entry->data, data, size);
      req->entry_done(static_cast<uint32_t>(entry_index), size);
      return true;
    }
    entry->received = size;
    bounce.state.store(kCopying, std::memory_order_release);
  }
  // GPU memory is not the CPU's to write: the NIC copies it.
  auto* region = static_cast<const MemoryRegion*>(entry->region);
  OpContext* op = &bounce.copy_op;
  op->slot = static_cast<uint32_t>((slot_index * kRdmaMaxEntries + entry_index) << 8 | index);
  for (;;) {
    ssize_t rc = endpoint_.write_self(data, size, descriptor_of(bounce_region(index)), entry->data,
                                      region->registration(), op);
    if (rc == 0) return true;
    if (rc != -FI_EAGAIN) {
      bounce.state.store(kIdle, std::memory_order_release);
      req->fail(static_cast<uint32_t>(entry_index), static_cast<int>(-rc), 0,
                "copying eager data into GPU memory failed");
      return true;
    }
    *result = poll_rails();
    if (*result != ncclSuccess) return true;
  }
}

RdmaRecvPath::EagerLookup RdmaRecvPath::find_eager_entry(uint32_t message, int32_t tag,
                                                         int* slot_index, int* entry_index) {
  const auto ahead = static_cast<int32_t>(message - next_index_);
  // A sender stays fewer than kRdmaEagerAhead messages past the first
  // one it has no clear-to-send for, which is at most next_index_.
  if (ahead >= static_cast<int32_t>(kRdmaEagerAhead)) return EagerLookup::kAhead;
  if (ahead >= 0) return EagerLookup::kNotPosted;
  for (int s = 0; s < kRdmaSlots; ++s) {
    Slot* candidate = slots_.find(static_cast<size_t>(s));
    if (candidate == nullptr) break;  // chunks are allocated in order
    Slot& slot = *candidate;
    if (slot.request == nullptr || message - slot.first_index >= uint32_t(slot.count)) continue;
    for (int e = 0; e < slot.count; ++e) {
      if (slot.entries[e].tag == tag && !slot.entries[e].claimed) {
        *slot_index = s;
        *entry_index = e;
        return EagerLookup::kFound;
      }
    }
  }
  return EagerLookup::kNoMatch;
}

bool RdmaRecvPath::take(const uint8_t* bytes, size_t length, const uint64_t* data, bool behind) {
  std::lock_guard<std::mutex> lock(state_mutex_);
  if (behind || declined_.load(std::memory_order_relaxed) > 0 ||
      !place_from_pool(bytes, length, data)) {
    declined_.fetch_add(1, std::memory_order_relaxed);
    return false;
  }
  placed_.fetch_add(1, std::memory_order_relaxed);
  return true;
}

bool RdmaRecvPath::place_from_pool(const uint8_t* bytes, size_t length, const uint64_t* data) {
  std::string problem;  // not read: the bounce path decodes again and says why
  uint32_t message = 0;
  int32_t tag = 0;
  size_t size = length;
  if (endpoint_.weft_matching()) {
    EagerHeader header;
    if (!decode_eager_header(bytes, length, eager_size_, &header, &problem) || header.probe ||
        header.aborted || header.size_notice || header.truncated) {
      return false;
    }
    message = header.index;
    tag = header.tag;
    size = header.size;
    bytes += kEagerHeaderSize;
  } else {
    EagerImmediate immediate;
    if (!decode_eager_immediate(data, next_index_, &immediate, &problem) ||
        immediate.header_follows || length > eager_size_) {
      return false;
    }
    message = immediate.index;
    tag = immediate.tag;
  }
  int slot_index = -1;
  int entry_index = -1;
  if (find_eager_entry(message, tag, &slot_index, &entry_index) != EagerLookup::kFound)
    return false;
  Slot& slot = slot_at(slot_index);
  Entry& entry = slot.entries[entry_index];
  auto* region = static_cast<const MemoryRegion*>(entry.region);
  if (size > entry.posted || (size > 0 && region != nullptr && region->type == NCCL_PTR_CUDA))
    return false;
  entry.claimed = true;
  entry.eager = true;
  slot.eager_entries.fetch_add(1, std::memory_order_relaxed);
  if (size > 0) std::memcpy(entry.data, bytes, size);
  placed_from_pool_.fetch_add(1, std::memory_order_relaxed);
  slot.request->entry_done(static_cast<uint32_t>(entry_index), size);
  return true;
}

void RdmaRecvPath::CopyTarget::on_complete(uint32_t slot, size_t, const uint64_t*) {
  uint32_t position = slot >> 8;
  Bounce& bounce = path->bounces_[slot & 0xff];
  std::lock_guard<std::mutex> lock(path->state_mutex_);
  Slot& owner = path->slot_at(static_cast<int>(position / kRdmaMaxEntries));
  int entry = static_cast<int>(position % kRdmaMaxEntries);
  if (owner.request != nullptr) {
    owner.request->entry_done(static_cast<uint32_t>(entry), owner.entries[entry].received);
  }
  bounce.state.store(kIdle, std::memory_order_release);
}

void RdmaRecvPath::CopyTarget::on_error(uint32_t slot, int error, size_t, const char* text) {
  uint32_t position = slot >> 8;
  Bounce& bounce = path->bounces_[slot & 0xff];
  std::lock_guard<std::mutex> lock(path->state_mutex_);
  Slot& owner = path->slot_at(static_cast<int>(position / kRdmaMaxEntries));
  if (owner.request != nullptr) {
    owner.request->fail(position % kRdmaMaxEntries, error, 0, text);
  }
  bounce.state.store(kIdle, std::memory_order_release);
}

ncclResult_t RdmaRecvPath::service(Repost repost) {
  if (ncclResult_t result = fault_.result(); result != ncclSuccess) return result;
  // Buffers still waiting for a message, or posted again now, and those
  // that had one: none waiting while messages are at hand means the
  // provider may be queueing the next ones.
  int waiting = 0;
  int arrived = 0;
  for (int i = 0; i < active_bounces_; ++i) {
    Bounce& bounce = bounces_[i];
    uint8_t state = bounce.state.load(std::memory_order_acquire);
    if (state == kPosted) ++waiting;
    if (state == kIdle && !closing_ && repost == Repost::kIdle) {
      ncclResult_t result = post_bounce(i);
      if (result != ncclSuccess) return result;
      if (bounce.state.load(std::memory_order_acquire) != kIdle) ++waiting;
      continue;
    }
    if (state == kArrived) {
      ++arrived;
      ncclResult_t result = ncclSuccess;
      if (!place_eager(i, &result)) {
        if (result != ncclSuccess) return result;
        continue;  // its receive is not posted yet
      }
      // A GPU copy keeps the buffer until it completes. An emptied buffer
      // is posted again by the next call, after the caller has its
      // receive: the others stay posted meanwhile.
      placed_.fetch_add(1, std::memory_order_relaxed);
      // Only this thread lowers it: later messages may go straight now.
      if (declined_.load(std::memory_order_relaxed) > 0)
        declined_.fetch_sub(1, std::memory_order_relaxed);
      uint8_t expected = kArrived;
      bounce.state.compare_exchange_strong(expected, kIdle, std::memory_order_acq_rel);
      if (result != ncclSuccess) return result;
    }
  }
  if (repost == Repost::kIdle && waiting == 0 && arrived > 0 && !bounces_grown_ && !closing_)
    grow_bounces();
  return ncclSuccess;
}

ncclResult_t RdmaRecvPath::progress() {
  // Before polling: take() places messages during the poll.
  const uint64_t placed_before = placed_.load(std::memory_order_relaxed);
  ncclResult_t result = poll_rails();
  if (result != ncclSuccess) return result;
  result = service(Repost::kIdle);
  if (result != ncclSuccess) return result;
  if (lost_cts_.load(std::memory_order_acquire) > 0) {
    judge_lost_cts();
    if (ncclResult_t fault = fault_.result(); fault != ncclSuccess) return fault;
  }
  result = resolve_unsent(endpoint_.weft_matching() ? Unsent::kAll
                          : placed_.load(std::memory_order_relaxed) == placed_before
                              ? Unsent::kIdle
                              : Unsent::kFilledOnly);
  if (result != ncclSuccess) return result;
  return peer_.check_alive(endpoint_.device_name());
}

void RdmaRecvPath::on_complete(uint32_t slot, size_t length, const uint64_t* remote_data) {
  Bounce& bounce = bounces_[slot];
  bounce.length = length;
  bounce.has_immediate = remote_data != nullptr;
  if (remote_data != nullptr) bounce.immediate = *remote_data;
  bounce.state.store(kArrived, std::memory_order_release);
}

void RdmaRecvPath::on_error(uint32_t slot, int error, size_t, const char* text) {
  bounces_[slot].state.store(kIdle, std::memory_order_release);
  if (error == FI_ECANCELED) return;  // closing
  fail(std::string("an eager receive failed: ") + fi_strerror(error) + " (" + text + ")");
}

void RdmaRecvPath::on_remote_write(uint32_t value, size_t length) {
  WriteImmediate immediate;
  std::string problem;
  if (!decode_immediate(value, &immediate, &problem)) {
    fail(problem);
    return;
  }
  std::lock_guard<std::mutex> lock(state_mutex_);
  Slot* target = slots_.find(immediate.slot);
  if (target == nullptr || target->request == nullptr || immediate.entry >= target->count) {
    fail("a write names request slot " + std::to_string(immediate.slot) + " entry " +
         std::to_string(immediate.entry) + ", which has no posted receive");
    return;
  }
  Slot& slot = *target;
  Entry& entry = slot.entries[immediate.entry];
  uint16_t bit = static_cast<uint16_t>(1u << immediate.segment);
  if (entry.eager) {
    fail("a write targets a receive that an eager message already filled");
    return;
  }
  if (entry.segments != 0 && entry.segments != immediate.segments) {
    fail("writes for one receive disagree on their segment count");
    return;
  }
  if ((entry.arrived & bit) != 0) {
    fail("segment " + std::to_string(immediate.segment) + " of a receive arrived twice");
    return;
  }
  entry.claimed = true;
  entry.segments = immediate.segments;
  entry.arrived = static_cast<uint16_t>(entry.arrived | bit);
  entry.received += length;
  if (entry.received > entry.posted) {
    fail("writes of " + std::to_string(entry.received) + " bytes into a receive of " +
         std::to_string(entry.posted));
    return;
  }
  complete_if_written(slot, immediate.entry);
}

void RdmaRecvPath::complete_if_written(Slot& slot, int index) {
  Entry& entry = slot.entries[index];
  if (entry.segments == 0 || entry.arrived != static_cast<uint16_t>((1u << entry.segments) - 1))
    return;
  if (needs_notices_ && !entry.noticed) return;
  size_t size = needs_notices_ ? entry.notice_size : entry.received;
  slot.request->entry_done(static_cast<uint32_t>(index), size);
}

void RdmaRecvPath::take_size_notice(const EagerHeader& header) {
  std::lock_guard<std::mutex> lock(state_mutex_);
  for (int s = 0; s < kRdmaSlots; ++s) {
    Slot* candidate = slots_.find(static_cast<size_t>(s));
    if (candidate == nullptr) break;  // chunks are allocated in order
    Slot& slot = *candidate;
    if (slot.request == nullptr || header.index - slot.first_index >= uint32_t(slot.count))
      continue;
    if (header.tag >= slot.count) break;
    Entry& entry = slot.entries[header.tag];
    if (!needs_notices_ || entry.eager || entry.noticed || header.size > entry.posted) {
      fail("unexpected size notice for message #" + std::to_string(header.index));
      return;
    }
    entry.claimed = true;
    entry.noticed = true;
    entry.notice_size = header.size;
    complete_if_written(slot, header.tag);
    return;
  }
  fail("size notice for message #" + std::to_string(header.index) + " matches no pending receive");
}

void RdmaRecvPath::recycle(RdmaRecvRequest* req) {
  {
    std::lock_guard<std::mutex> lock(state_mutex_);
    slot_at(slot_of(req)).request = nullptr;
  }
  pool_.release(req);
}

ncclResult_t RdmaRecvPath::report_failure(int error, size_t overflow_length, size_t posted_size,
                                          const char* text) {
  return completion_failure("receive", endpoint_, peer_.name, error, overflow_length, posted_size,
                            text);
}

void RdmaRecvPath::cts_failed(RdmaRecvRequest* request, int error, const char* text) {
  if (error != FI_ECANCELED) {
    fault_.raise(ncclRemoteError, endpoint_.device_name(), peer_.name,
                 std::string("a clear-to-send failed: ") + fi_strerror(error) + " (" + text + ")");
  }
  request->fail(kCtsOp, error, 0, text);
}

bool RdmaRecvPath::in_flight() {
  for (int i = 0; i < active_bounces_; ++i) {
    uint8_t state = bounces_[i].state.load(std::memory_order_acquire);
    if (state == kPosted || state == kCopying) return true;
  }
  if (pool_.any_in_use([](RdmaRecvRequest& req) { return !req.finished(); })) return true;
  for (int i = 0; i < kRdmaSlots; ++i) {
    // The provider may still read the buffer.
    if (cts_sends_[i].busy.load(std::memory_order_acquire)) return true;
  }
  return false;
}

void RdmaRecvPath::cancel_receives() {
  closing_ = true;
  if (sink_attached_) {
    endpoint_.detach_eager_sink(eager_tag(peer_.local_comm_id));
    sink_attached_ = false;
  }
  // Held back clear-to-sends are not sent any more: their receives wait as
  // any other pending receive does.
  for (; unsent_head_ != unsent_tail_; ++unsent_head_) {
    slot_at(unsent_[unsent_head_ % kRdmaSlots]).request->cts_done();
  }
  for (int i = 0; i < active_bounces_; ++i) {
    if (bounces_[i].state.load(std::memory_order_acquire) == kPosted) {
      endpoint_.cancel(&bounces_[i].op);
    }
  }
}

}  // namespace weft::ofi
