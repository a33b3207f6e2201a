#include "ofi/rdma/rdma_send_path.h"

#include <rdma/fi_errno.h>

#include <algorithm>
#include <cstdio>

#include "core/net_events.h"
#include "ofi/endpoint/completion_failure.h"
#include "ofi/endpoint/memory_region.h"
#include "ofi/endpoint/tag_layout.h"
#include "weft/log.h"

namespace weft::ofi {

RdmaSendPath::RdmaSendPath(std::vector<RdmaRail> rails, PathPeer peer, size_t eager_size,
                           bool size_notices, size_t min_stripe,
                           std::chrono::milliseconds probe_deadline)
    : rails_(std::move(rails)),
      endpoint_(*rails_[0].endpoint),
      peer_(std::move(peer)),
      eager_size_(eager_size),
      min_stripe_(std::max<size_t>(min_stripe, 1)),
      header_eager_(endpoint_.iov_limit() >= 2),
      immediate_eager_(!endpoint_.weft_matching()),
      eager_ahead_(eager_ahead(endpoint_.weft_matching())),
      size_notices_(size_notices),
      cts_stride_(cts_size(kRdmaMaxEntries, static_cast<int>(rails_.size()))),
      cts_bytes_(new uint8_t[kCtsBuffers * cts_stride_]),
      remote_targets_(new uint64_t[kRdmaSlots * kRdmaMaxEntries * 2 * rails_.size()]),
      probe_deadline_(probe_deadline) {
  for (int i = 0; i < kCtsBuffers; ++i) {
    cts_[i].op.target = this;
    cts_[i].op.slot = static_cast<uint32_t>(i);
  }
  abort_op_.target = this;
  abort_op_.slot = kAbortSlot;
  probe_op_.target = this;
  probe_op_.slot = kProbeSlot;
  for (const RdmaRail& rail : rails_) {
    max_write_ = std::min(max_write_, std::max<size_t>(rail.endpoint->max_write_size(), 1));
  }
}

RdmaSendPath::~RdmaSendPath() {
  deregister_memory(&endpoint_, endpoint_.device_name(), cts_region_);
  for (HeaderBlock& block : header_blocks_) {
    deregister_memory(&endpoint_, endpoint_.device_name(), block.region);
  }
}

ncclResult_t RdmaSendPath::start() {
  ncclResult_t result = ncclSuccess;
  if (!endpoint_.receives_pooled()) {
    result = register_memory(endpoint_, cts_bytes_.get(), kCtsBuffers * cts_stride_, MemorySource{},
                             &cts_region_);
    if (result != ncclSuccess) return result;
  }
  for (int i = 0; i < kCtsBuffers; ++i) {
    result = post_cts_receive(i);
    if (result != ncclSuccess) return result;
  }
  return ncclSuccess;
}

uint8_t* RdmaSendPath::header_row(int row) {
  const bool first = row < kFirstHeaderRows;
  HeaderBlock& block = header_blocks_[first ? 0 : 1];
  if (!block.rows) {
    // The first block's last rows are the abort notice's and the probe's.
    const size_t rows = first ? kFirstHeaderRows + 2 : kPoolSize - kFirstHeaderRows;
    const size_t size = rows * kEagerHeaderSize;
    block.rows.reset(new (std::nothrow) uint8_t[size]());
    ncclResult_t result = block.rows ? register_memory(endpoint_, block.rows.get(), size,
                                                       MemorySource{}, &block.region)
                                     : ncclSystemError;
    if (result != ncclSuccess) {
      block.rows.reset();
      WEFT_WARN("%s: no registered memory for eager headers to %s", endpoint_.device_name().c_str(),
                peer_.name.c_str());
      return nullptr;
    }
  }
  const int index = row == kAbortRow   ? kFirstHeaderRows
                    : row == kProbeRow ? kFirstHeaderRows + 1
                    : first            ? row
                                       : row - kFirstHeaderRows;
  return block.rows.get() + static_cast<size_t>(index) * kEagerHeaderSize;
}

void* RdmaSendPath::header_descriptor(int row) const {
  return descriptor_of(header_blocks_[row < kFirstHeaderRows ? 0 : 1].region);
}

ncclResult_t RdmaSendPath::post_cts_receive(int index) {
  CtsBuffer& buffer = cts_[index];
  buffer.state.store(kPosted, std::memory_order_relaxed);
  ssize_t rc = endpoint_.receive(cts_bytes(index), cts_stride_, descriptor_of(cts_region_),
                                 cts_tag(peer_.local_comm_id), &buffer.op);
  if (rc == 0) return ncclSuccess;
  buffer.state.store(kIdle, std::memory_order_relaxed);
  // Posted again by a later progress; the provider queues what arrives meanwhile.
  if (rc == -FI_EAGAIN || rc == -FI_ENOMEM) return ncclSuccess;
  WEFT_WARN("%s: posting a clear-to-send receive for %s failed: %s",
            endpoint_.device_name().c_str(), peer_.name.c_str(), fi_strerror((int)-rc));
  return ncclSystemError;
}

ncclResult_t RdmaSendPath::poll_rails() {
  for (const RdmaRail& rail : rails_) {
    ncclResult_t result = rail.endpoint->poll();
    if (result != ncclSuccess) return result;
  }
  return ncclSuccess;
}

void RdmaSendPath::fail(const std::string& problem) {
  fault_.raise(ncclRemoteError, endpoint_.device_name(), peer_.name, "protocol error: " + problem);
}

int RdmaSendPath::claim_entry(Group& group, int32_t tag) {
  for (int e = 0; e < group.count; ++e) {
    if (!group.used[e] && group.tag[e] == tag) {
      group.used[e] = true;
      ++group.consumed;
      return e;
    }
  }
  return -1;
}

void RdmaSendPath::claim_eager_entries(Group& group) {
  for (int i = 0; i < group.count; ++i) {
    uint32_t index = group.first_index + static_cast<uint32_t>(i);
    if (static_cast<int32_t>(index - next_index_) >= 0) break;  // not sent yet
    EagerSent& sent = eager_sent_[index % kRdmaEagerAhead];
    if (!sent.pending) continue;  // written, not eager
    if (claim_entry(group, sent.tag) < 0) {
      fail("the receiver posted no receive with tag " + std::to_string(sent.tag) +
           " for message #" + std::to_string(index));
      return;
    }
    // Its request completed when the provider sent it; a message larger
    // than this entry fails at the receiver, which sees both sizes.
    sent.pending = false;
  }
}

bool RdmaSendPath::pass_skipped_groups(const CtsMessage& cts) {
  const uint32_t end = cts.first_index;
  const uint32_t covered = end - group_first_;
  // Every skipped group held at least one message, each of them sent.
  if (covered > next_index_ - group_first_ || covered < cts.skipped) {
    fail("clear-to-send #" + std::to_string(cts.group_seq) + " says " +
         std::to_string(cts.skipped) + " groups from #" + std::to_string(group_seq_) +
         " were filled eagerly by messages #" + std::to_string(group_first_) + " up to #" +
         std::to_string(end) + ", but only those before #" + std::to_string(next_index_) +
         " were sent");
    return false;
  }
  for (uint32_t seq = group_seq_; seq != cts.group_seq && seq - group_seq_ < kRdmaSlots; ++seq) {
    if (groups_[seq % kRdmaSlots].valid) {
      fail("clear-to-send #" + std::to_string(cts.group_seq) + " says group #" +
           std::to_string(seq) + " was filled eagerly, but that group had a clear-to-send");
      return false;
    }
  }
  for (uint32_t index = group_first_; index != end; ++index) {
    EagerSent& sent = eager_sent_[index % kRdmaEagerAhead];
    if (!sent.pending) {
      fail("message #" + std::to_string(index) +
           " was written, but the receiver says its group was filled eagerly");
      return false;
    }
    sent.pending = false;
  }
  group_seq_ = cts.group_seq;
  group_first_ = end;
  return true;
}

void RdmaSendPath::take_cts(Group& group, const CtsMessage& cts) {
  group = Group{};
  group.valid = true;
  group.slot = cts.slot;
  group.count = cts.count;
  group.first_index = cts.first_index;
  for (int e = 0; e < cts.count; ++e) {
    group.size[e] = cts.entries[e].size;
    group.tag[e] = cts.entries[e].tag;
    uint64_t* target = remote_target(group, e);
    for (size_t r = 0; r < rails_.size(); ++r) {
      target[r] = cts.entries[e].address[r];
      target[rails_.size() + r] = cts.entries[e].key[r];
    }
  }
}

void RdmaSendPath::advance_groups() {
  for (;;) {
    Group& group = groups_[group_seq_ % kRdmaSlots];
    if (!group.valid) return;
    if (group.first_index != group_first_) {
      fail("clear-to-send #" + std::to_string(group_seq_) + " starts at message #" +
           std::to_string(group.first_index) + ", expected #" + std::to_string(group_first_));
      return;
    }
    claim_eager_entries(group);
    if (group.consumed < group.count) return;
    group.valid = false;
    group_first_ += group.count;
    ++group_seq_;
  }
}

ncclResult_t RdmaSendPath::absorb_cts() {
  for (;;) {
    bool waiting = false;
    uint32_t before = group_seq_;
    for (int i = 0; i < kCtsBuffers; ++i) {
      CtsBuffer& buffer = cts_[i];
      if (buffer.state.load(std::memory_order_acquire) != kArrived) continue;
      CtsMessage cts;
      std::string problem;
      if (!decode_cts(cts_bytes(i), buffer.length, static_cast<int>(rails_.size()), &cts,
                      &problem)) {
        fail(problem);
        return ncclRemoteError;
      }
      uint32_t ahead = cts.group_seq - group_seq_;
      if (static_cast<int32_t>(ahead) < 0) {
        fail("clear-to-send #" + std::to_string(cts.group_seq) + " arrived after its group");
        return ncclRemoteError;
      }
      if (cts.skipped > ahead) {
        fail("clear-to-send #" + std::to_string(cts.group_seq) + " skips " +
             std::to_string(cts.skipped) + " groups, but group #" + std::to_string(group_seq_) +
             " is the oldest not done");
        return ncclRemoteError;
      }
      // The groups it skips follow the older ones: once those are done it
      // speaks for everything up to its own group.
      if (ahead - cts.skipped >= kRdmaSlots || (cts.skipped > 0 && ahead != cts.skipped)) {
        waiting = true;  // kept in its buffer until older groups are sent
        continue;
      }
      if (cts.skipped > 0 && !pass_skipped_groups(cts)) return ncclRemoteError;
      Group& group = groups_[cts.group_seq % kRdmaSlots];
      if (group.valid) {
        fail("clear-to-send #" + std::to_string(cts.group_seq) + " arrived twice");
        return ncclRemoteError;
      }
      take_cts(group, cts);
      buffer.state.store(kIdle, std::memory_order_relaxed);
      if (!closing_) {
        ncclResult_t result = post_cts_receive(i);
        if (result != ncclSuccess) return result;
      }
    }
    advance_groups();
    if (fault_.result() != ncclSuccess) return ncclRemoteError;
    // Waiting ones may fit now that older groups are done.
    if (!waiting || group_seq_ == before) break;
  }
  return ncclSuccess;
}

ncclResult_t RdmaSendPath::service() {
  if (fault_.result() != ncclSuccess) return ncclRemoteError;
  // No clear-to-send buffer changed since the last walk, which left none
  // to post or to take in: this one would find nothing (every isend asks).
  const uint32_t events = cts_events_.load(std::memory_order_acquire);
  if (events == cts_events_seen_ && !cts_unsettled_) return ncclSuccess;
  cts_events_seen_ = events;
  for (int i = 0; i < kCtsBuffers && !closing_; ++i) {
    if (cts_[i].state.load(std::memory_order_acquire) == kIdle) {
      ncclResult_t result = post_cts_receive(i);
      if (result != ncclSuccess) return result;
    }
  }
  ncclResult_t result = absorb_cts();
  cts_unsettled_ = false;
  for (const CtsBuffer& buffer : cts_) {
    const uint8_t state = buffer.state.load(std::memory_order_acquire);
    // One held for older groups, or one the provider would not take yet.
    cts_unsettled_ = cts_unsettled_ || state == kArrived || (state == kIdle && !closing_);
  }
  return result;
}

ncclResult_t RdmaSendPath::progress() {
  ncclResult_t result = poll_rails();
  if (result != ncclSuccess) return result;
  result = service();
  if (result != ncclSuccess) return result;
  return peer_.check_alive(endpoint_.device_name());
}

ncclResult_t RdmaSendPath::send_eager(void* data, size_t size, int tag, void* mhandle,
                                      bool truncated, size_t posted, Request** request) {
  // Far ahead of the receiver's clear-to-sends: wait for them (NCCL
  // retries). This also keeps the index in the immediate unambiguous.
  // (Once the oldest group's clear-to-send is here the message is in that
  // group: fewer than kRdmaMaxEntries ahead.)
  if (!truncated && !groups_[group_seq_ % kRdmaSlots].valid &&
      next_index_ - group_first_ >= eager_ahead_) {
    probe_while_waiting();
    return progress();
  }
  SendRequest* req = pool_.acquire();
  if (req == nullptr) return poll_rails();
  const uint32_t index = next_index_;
  req->start(this, truncated ? 2 : 1, /*is_send=*/true, 1);
  req->set_posted_size(kEagerSendOp, size);
  const uint64_t wire_tag = eager_tag(peer_.remote_comm_id);
  uint32_t wire_index = index;
  int32_t wire_message_tag = tag;
  if (const TestAids* aids = endpoint_.test_aids()) [[unlikely]]
    mutate_eager(aids->wire_mutation, &wire_index, &wire_message_tag);
  ssize_t rc;
  if (!truncated && immediate_eager_ && eager_tag_fits(tag)) {
    // Data alone, index and tag in the immediate.
    const uint32_t immediate = encode_eager_immediate(wire_index, wire_message_tag);
    if (host_memory(mhandle) && endpoint_.may_inject(size)) {
      rc = endpoint_.inject_data(data, size, immediate, peer_.address, wire_tag);
      if (rc == 0) req->complete_now(kEagerSendOp);
    } else {
      rc = endpoint_.send_data(data, size, descriptor_of(mhandle), immediate, peer_.address,
                               wire_tag, req->op(kEagerSendOp));
    }
  } else {
    EagerHeader header;
    header.index = wire_index;
    header.tag = wire_message_tag;
    header.size = size;
    header.truncated = truncated;
    uint8_t* bytes = header_row(index_of(req));
    if (bytes == nullptr) {
      pool_.release(req);
      return ncclSystemError;
    }
    encode_eager_header(header, bytes);
    rc = endpoint_.send_with_header(bytes, kEagerHeaderSize, header_descriptor(index_of(req)), data,
                                    truncated ? 0 : size, descriptor_of(mhandle),
                                    kEagerHeaderFollows, peer_.address, wire_tag,
                                    req->op(kEagerSendOp));
  }
  if (rc != 0) {
    pool_.release(req);
    if (rc == -FI_EAGAIN) return poll_rails();
    WEFT_WARN("%s: eager send of %zu bytes to %s failed: %s", endpoint_.device_name().c_str(), size,
              peer_.name.c_str(), fi_strerror((int)-rc));
    return ncclSystemError;
  }
  *request = req;
  if (truncated) {
    // Already matched: this notice tells the receiver why nothing comes.
    char text[160];
    std::snprintf(text, sizeof(text), "message truncated: %zu bytes sent to a receive of %zu bytes",
                  size, posted);
    req->on_error(kTruncatedOp, kTruncated, size - posted, text);
    return ncclSuccess;
  }
  ++next_index_;
  eager_sent_[index % kRdmaEagerAhead] = EagerSent{true, tag};
  // Its group may be known already.
  advance_groups();
  return ncclSuccess;
}

ncclResult_t RdmaSendPath::write_message(Group& group, int entry, void* data, size_t size,
                                         void* mhandle, Request** request) {
  const size_t rail_count = rails_.size();
  const uint64_t* target = remote_target(group, entry);  // addresses, then keys
  // Stripes of at least min_stripe_ bytes, one per rail; smaller messages
  // go whole to the next rail in turn.
  size_t stripes = std::clamp<size_t>(size / min_stripe_, 1, rail_count);
  size_t first_rail = stripes == 1 ? next_rail_++ % rail_count : 0;
  size_t stripe = (size + stripes - 1) / stripes;
  const size_t max_write = max_write_;
  size_t per_stripe = std::max<size_t>((stripe + max_write - 1) / max_write, 1);
  size_t segments = stripes * per_stripe;
  if (segments > static_cast<size_t>(kRdmaMaxSegments)) {
    WEFT_WARN("%s: a message of %zu bytes needs %zu writes of at most %zu bytes (limit %d)",
              endpoint_.device_name().c_str(), size, segments, max_write, kRdmaMaxSegments);
    return ncclInvalidArgument;
  }
  SendRequest* req = pool_.acquire();
  if (req == nullptr) return poll_rails();
  int ops = static_cast<int>(segments) + (size_notices_ ? 1 : 0);
  req->start(this, ops, /*is_send=*/true, 1);
  req->set_posted_size(0, size);
  const bool profiled = net_profiler_on();
  if (profiled) [[unlikely]]
    begin_shares(*req);
  size_t chunk = std::max<size_t>((size + segments - 1) / segments, 1);
  WriteImmediate immediate;
  immediate.slot = group.slot;
  immediate.entry = static_cast<uint8_t>(entry);
  immediate.segments = static_cast<uint8_t>(segments);
  for (size_t j = 0; j < segments; ++j) {
    size_t offset = std::min(j * chunk, size);
    size_t length = std::min(chunk, size - offset);
    size_t r = (first_rail + j / per_stripe) % rail_count;
    const RdmaRail& rail = rails_[r];
    immediate.target = rail.remote_target;
    immediate.segment = static_cast<uint8_t>(j);
    if (const TestAids* aids = endpoint_.test_aids()) [[unlikely]]
      mutate_write(aids->wire_mutation, &immediate);
    // Segment j is operation j, and share j (core/net_events.h): on a
    // rail, under its index.
    if (profiled) [[unlikely]]
      record_share(*req, static_cast<uint32_t>(r), length);
    for (;;) {
      ssize_t rc = rail.endpoint->write(static_cast<uint8_t*>(data) + offset, length,
                                        descriptor_of(region_on_rail(mhandle, r)), rail.peer,
                                        target[r] + offset, target[rail_count + r],
                                        encode_immediate(immediate), req->op(static_cast<int>(j)));
      if (rc == 0) break;
      if (rc == -FI_EAGAIN && j == 0) {
        if (profiled) begin_shares(*req);  // its next use records its own
        pool_.release(req);
        return poll_rails();  // NCCL retries the send
      }
      if (rc == -FI_EAGAIN) {
        ncclResult_t result = poll_rails();
        if (result == ncclSuccess) continue;
        rc = -FI_EIO;
      }
      WEFT_WARN("%s: writing %zu bytes to %s failed: %s", rail.endpoint->device_name().c_str(),
                length, peer_.name.c_str(), fi_strerror((int)-rc));
      if (j == 0) {
        if (profiled) begin_shares(*req);
        pool_.release(req);
        return ncclSystemError;
      }
      req->on_error(static_cast<uint32_t>(j), static_cast<int>(-rc), 0, "posting a write failed");
      req->drop_unposted(ops - static_cast<int>(j) - 1);
      *request = req;
      return ncclSuccess;
    }
  }
  if (size_notices_) {
    // The receiver's provider reports no write lengths: say the size.
    EagerHeader notice;
    notice.index = next_index_;
    notice.tag = entry;
    notice.size = size;
    notice.size_notice = true;
    uint8_t* bytes = header_row(index_of(req));
    if (bytes == nullptr) {
      req->on_error(static_cast<uint32_t>(segments), FI_ENOMEM, 0, "no memory for the size notice");
      *request = req;
      return ncclSuccess;
    }
    encode_eager_header(notice, bytes);
    const bool inject = endpoint_.may_inject(kEagerHeaderSize);
    for (;;) {
      ssize_t rc = inject
                       ? endpoint_.inject_data(bytes, kEagerHeaderSize, kEagerHeaderFollows,
                                               peer_.address, eager_tag(peer_.remote_comm_id))
                       : endpoint_.send_with_header(
                             bytes, kEagerHeaderSize, header_descriptor(index_of(req)), nullptr, 0,
                             nullptr, kEagerHeaderFollows, peer_.address,
                             eager_tag(peer_.remote_comm_id), req->op(static_cast<int>(segments)));
      if (rc == 0) {
        if (inject) req->complete_now(static_cast<uint32_t>(segments));
        break;
      }
      ncclResult_t result = rc == -FI_EAGAIN ? poll_rails() : ncclSystemError;
      if (result != ncclSuccess) {
        req->on_error(static_cast<uint32_t>(segments), FI_EIO, 0, "sending a size notice failed");
        break;
      }
    }
  }
  *request = req;
  return ncclSuccess;
}

ncclResult_t RdmaSendPath::isend(void* data, size_t size, int tag, void* mhandle,
                                 Request** request) {
  *request = nullptr;
  if (blocked_ && tag != blocked_tag_) return progress();
  ncclResult_t result = post(data, size, tag, mhandle, request);
  blocked_ = result == ncclSuccess && *request == nullptr;
  blocked_tag_ = tag;
  return result;
}

ncclResult_t RdmaSendPath::post(void* data, size_t size, int tag, void* mhandle,
                                Request** request) {
  if (size == 0 ||
      (size <= eager_size_ && (header_eager_ || (immediate_eager_ && eager_tag_fits(tag))))) {
    // An eager message needs no clear-to-send: it goes first, and those
    // that arrived meanwhile are filed after it, off its critical path.
    if (fault_.result() != ncclSuccess) return ncclRemoteError;
    ncclResult_t result = send_eager(data, size, tag, mhandle, false, 0, request);
    if (result != ncclSuccess) return result;
    result = service();
    // A failure found there is the connection's: later calls return it.
    return *request != nullptr ? ncclSuccess : result;
  }
  ncclResult_t result = service();
  if (result != ncclSuccess) return result;
  if (mhandle == nullptr) {
    WEFT_WARN(
        "%s: isend of %zu bytes without a memory handle (the rdma protocol writes from "
        "registered memory)",
        endpoint_.device_name().c_str(), size);
    return ncclInvalidArgument;
  }
  Group* current = &groups_[group_seq_ % kRdmaSlots];
  if (!current->valid || next_index_ - group_first_ >= current->count) {
    // The clear-to-send may be waiting in the completion queue.
    result = progress();
    if (result != ncclSuccess) return result;
    // Taken again: a clear-to-send that speaks for skipped groups moves
    // group_seq_ on, and the place of the old one may hold a newer group.
    current = &groups_[group_seq_ % kRdmaSlots];
    // The receiver has not posted this message's receive yet: NCCL retries.
    if (!current->valid || next_index_ - group_first_ >= current->count) {
      probe_while_waiting();
      return ncclSuccess;
    }
  }
  Group& group = *current;
  int entry = claim_entry(group, tag);
  if (entry < 0) {
    fail("the receiver posted no receive with tag " + std::to_string(tag) + " for message #" +
         std::to_string(next_index_));
    return ncclRemoteError;
  }
  uint64_t posted = group.size[entry];
  const bool hostile_oversize =
      wire_mutation_of(endpoint_.test_aids()) == WireMutation::kWriteOversize;
  if (size > posted && !hostile_oversize) {
    // Never write beyond the posted buffer: tell both sides instead.
    result = send_eager(data, size, tag, mhandle, true, posted, request);
  } else {
    result = write_message(group, entry, data, size, mhandle, request);
  }
  if (*request == nullptr) {
    group.used[entry] = false;  // not sent: the retry claims it again
    --group.consumed;
    return result;
  }
  eager_sent_[next_index_ % kRdmaEagerAhead].pending = false;
  ++next_index_;
  advance_groups();
  if (waiting_since_ != std::chrono::steady_clock::time_point{}) [[unlikely]] {
    waiting_since_ = {};
    probe_gap_ = kFirstProbeGap;
    // A probe in flight or failed still gets its verdict at the next wait.
    const uint8_t probe = probe_state_.load(std::memory_order_acquire);
    if (probe == kProbeRefused || probe == kProbeDone) {
      probe_state_.store(kNoProbe, std::memory_order_relaxed);
      probe_since_ = {};
    }
  }
  return result;
}

void RdmaSendPath::on_complete(uint32_t slot, size_t length, const uint64_t*) {
  if (slot == kProbeSlot) {
    probe_state_.store(kProbeDone, std::memory_order_release);
    return;
  }
  if (slot == kAbortSlot) {
    abort_done_.store(true, std::memory_order_release);
    return;
  }
  cts_[slot].length = length;
  cts_[slot].state.store(kArrived, std::memory_order_release);
  cts_events_.fetch_add(1, std::memory_order_release);
}

void RdmaSendPath::on_error(uint32_t slot, int error, size_t, const char* text) {
  if (slot == kProbeSlot) {
    if (error == FI_ECANCELED && closing_) {
      probe_state_.store(kNoProbe, std::memory_order_release);
      return;
    }
    probe_failure_ = std::string("failed: ") + fi_strerror(error) + " (" + text + ")";
    probe_state_.store(kProbeFailed, std::memory_order_release);
    return;
  }
  if (slot == kAbortSlot) {
    abort_done_.store(true, std::memory_order_release);
    return;
  }
  cts_[slot].state.store(kIdle, std::memory_order_release);
  cts_events_.fetch_add(1, std::memory_order_release);
  if (error == FI_ECANCELED) return;  // closing
  fail(std::string("a clear-to-send receive failed: ") + fi_strerror(error) + " (" + text + ")");
}

void RdmaSendPath::recycle(Request* request) {
  pool_.release(static_cast<SendRequest*>(request));
}

void RdmaSendPath::send_abort_notice() {
  if (abort_posted_ || closing_) return;
  abort_posted_ = true;
  EagerHeader notice;
  notice.index = next_index_;
  notice.aborted = true;
  if (send_notice(notice, kAbortRow, &abort_op_) != 0) {
    abort_done_.store(true, std::memory_order_release);  // nothing in flight
  }
}

ssize_t RdmaSendPath::send_notice(const EagerHeader& notice, int row, OpContext* op) {
  uint8_t* bytes = header_row(row);
  if (bytes == nullptr) return -FI_ENOMEM;
  encode_eager_header(notice, bytes);
  return endpoint_.send_with_header(bytes, kEagerHeaderSize, header_descriptor(row), nullptr, 0,
                                    nullptr, kEagerHeaderFollows, peer_.address,
                                    eager_tag(peer_.remote_comm_id), op);
}

void RdmaSendPath::fail_probe(const std::string& why) {
  fault_.raise(ncclRemoteError, endpoint_.device_name(), peer_.name,
               "a probe of rail 0, sent while a send waited for its clear-to-send, " + why +
                   ": the rail's connection is down and the clear-to-send was lost with it");
}

void RdmaSendPath::probe_while_waiting() {
  if (probe_deadline_.count() == 0 || closing_ || (++wait_calls_ & 63u) != 0) return;
  const auto now = std::chrono::steady_clock::now();
  if (waiting_since_ == std::chrono::steady_clock::time_point{}) {
    waiting_since_ = now;
    return;
  }
  const uint8_t state = probe_state_.load(std::memory_order_acquire);
  switch (state) {
    case kProbeDone:
      // Rail 0 carries messages: the receiver has simply not posted yet.
      probe_state_.store(kNoProbe, std::memory_order_relaxed);
      probe_since_ = {};
      waiting_since_ = now;
      probe_gap_ = std::min(probe_gap_ * 2, kMaxProbeGap);
      return;
    case kNoProbe:
      if (now - waiting_since_ < probe_gap_ || fault_.raised()) return;
      probe_since_ = now;
      break;
    case kProbeFailed:
      if (probe_failed_at_ == std::chrono::steady_clock::time_point{}) probe_failed_at_ = now;
      if (now - probe_failed_at_ >= kProbeFailGrace) fail_probe(probe_failure_);
      return;
    default:  // in flight, or refused and asked again every kRefusedProbeGap
      if (now - probe_since_ >= probe_deadline_) {
        const auto seconds = std::chrono::duration_cast<std::chrono::seconds>(now - probe_since_);
        fail_probe(std::string(state == kProbeInFlight ? "has not completed" : "was not taken") +
                   " in " + std::to_string(seconds.count()) + " s (WEFT_PEER_TIMEOUT_MS)");
        return;
      }
      if (state == kProbeInFlight || now - waiting_since_ < kRefusedProbeGap) return;
      break;
  }
  EagerHeader probe;
  probe.probe = true;
  probe_state_.store(kProbeInFlight, std::memory_order_relaxed);
  ssize_t rc = send_notice(probe, kProbeRow, &probe_op_);
  if (rc == 0) return;
  waiting_since_ = now;
  if (rc == -FI_EAGAIN) {
    probe_state_.store(kProbeRefused, std::memory_order_relaxed);
    return;
  }
  probe_failure_ = std::string("could not be posted: ") + fi_strerror(static_cast<int>(-rc));
  probe_state_.store(kProbeFailed, std::memory_order_relaxed);
}

ncclResult_t RdmaSendPath::report_failure(int error, size_t overflow_length, size_t posted_size,
                                          const char* text) {
  // A cancellation reaching test() is the provider dropping the connection.
  if (error != kTruncated) send_abort_notice();
  if (rails_.size() == 1) {
    return completion_failure("send", endpoint_, peer_.name, error, overflow_length, posted_size,
                              text);
  }
  // Which rail's write failed is not kept per request: name them all, and
  // give every rail a fresh endpoint for later comms.
  std::string operation = "send over rails";
  for (const RdmaRail& rail : rails_) {
    operation += " " + rail.endpoint->device_name();
    if (error != FI_ECANCELED && error != kTruncated) rail.endpoint->mark_broken();
  }
  return completion_failure(operation.c_str(), endpoint_, peer_.name, error, overflow_length,
                            posted_size, text);
}

bool RdmaSendPath::in_flight() {
  if (abort_posted_ && !abort_done_.load(std::memory_order_acquire)) return true;
  if (probe_state_.load(std::memory_order_acquire) == kProbeInFlight) return true;
  for (auto& buffer : cts_) {
    if (buffer.state.load(std::memory_order_acquire) == kPosted) return true;
  }
  return pool_.any_in_use([](SendRequest& req) { return !req.finished(); });
}

bool RdmaSendPath::awaits_clear_to_send() const {
  for (const EagerSent& sent : eager_sent_) {
    if (sent.pending) return true;
  }
  return false;
}

void RdmaSendPath::cancel_receives() {
  closing_ = true;
  for (auto& buffer : cts_) {
    if (buffer.state.load(std::memory_order_acquire) == kPosted) endpoint_.cancel(&buffer.op);
  }
}

}  // namespace weft::ofi
