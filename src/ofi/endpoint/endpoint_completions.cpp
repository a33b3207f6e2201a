// Reading the completion queue and handing each entry to what it belongs
// to: the operation's target, or the receiver a peer's write names.
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>

#include "ofi/endpoint/endpoint.h"
#include "weft/log.h"

namespace weft::ofi {
namespace {

// This endpoint's own send, write or read finished (not a peer's write,
// not a receive).
bool local_transfer(uint64_t flags) {
  return (flags & (FI_SEND | FI_WRITE | FI_READ)) != 0 &&
         (flags & (FI_RECV | FI_REMOTE_WRITE | FI_REMOTE_READ)) == 0;
}

}  // namespace

ncclResult_t Endpoint::poll() {
  fi_cq_tagged_entry entries[kMaxBatch];
  // Completion callbacks run under the lock; they only record results.
  std::lock_guard<std::mutex> lock(domain_.io_mutex());
  if (lost_injected_.load(std::memory_order_relaxed)) return ncclRemoteError;
  if (test_aids_ && test_aids_->held_injects.active()) [[unlikely]] {
    test_aids_->held_injects.release(
        [this](const void* buffer, size_t size, uint64_t data, fi_addr_t peer, uint64_t tag) {
          return inject_now(buffer, size, data, peer, tag);
        });
  }
  if (pooled_) {
    if (unposted_.size() >= kPoolSlots / 4) repost_pool_slots();
    deliver_matched();
  }
  ssize_t count = read_queue(entries, static_cast<size_t>(cq_read_count_));
  if (count > 0) {
    ++batches_read_;
    deliver(entries, count);
    return ncclSuccess;
  }
  if (count == -FI_EAGAIN) {
    deliver(entries, 0);
    if (pooled_) repost_pool_slots();
    return ncclSuccess;
  }
  if (count == -FI_EAVAIL) {
    fi_cq_err_entry error{};
    ssize_t rc = fi_cq_readerr(cq_.get(), &error, 0);
    if (rc < 0) return rc == -FI_EAGAIN ? ncclSuccess : fail("fi_cq_readerr", (int)rc);
    if (test_aids_ && local_transfer(error.flags)) [[unlikely]]
      test_aids_->held_injects.tracked_done();
    if (is_pool_op(error.op_context)) {
      pool_error(error, static_cast<int>(static_cast<OpContext*>(error.op_context)->slot));
      return ncclSuccess;
    }
    char text[256];
    const char* detail =
        fi_cq_strerror(cq_.get(), error.prov_errno, error.err_data, text, sizeof(text));
    auto* op = static_cast<OpContext*>(error.op_context);
    if (op != nullptr && op->target != nullptr) {
      int code = error.err == FI_ETRUNC ? kTruncated : error.err;
      op->target->on_error(op->slot, code, error.olen, detail != nullptr ? detail : "");
      return ncclSuccess;
    }
    if (error.err == FI_ECANCELED) {
      // A provider dropping its connection to a peer that closed (tcp).
      WEFT_INFO(NCCL_NET, "%s: an injected message was cancelled by the provider (%s)",
                device_name_.c_str(), detail != nullptr ? detail : "");
      return ncclSuccess;
    }
    WEFT_WARN(
        "%s: an injected message (a clear-to-send, an eager message or a notice) failed: %s "
        "(%s). The provider does not say to which peer, so every connection on this endpoint "
        "fails rather than wait for it",
        device_name_.c_str(), fi_strerror(error.err), detail != nullptr ? detail : "");
    mark_broken();
    lost_injected_.store(true, std::memory_order_relaxed);
    return ncclRemoteError;
  }
  if (!cq_failed_.exchange(true)) fail("fi_cq_read", static_cast<int>(count));
  return ncclSystemError;
}

ssize_t Endpoint::read_queue(fi_cq_tagged_entry* entries, size_t count) {
  if (!weft_matching_) return fi_cq_read(cq_.get(), entries, count);
  // Fabrics without FI_TAGGED (efa-direct) offer no tagged entry format.
  fi_cq_data_entry data[kMaxBatch];
  ssize_t read = fi_cq_read(cq_.get(), data, count);
  for (ssize_t i = 0; i < read; ++i) {
    entries[i].op_context = data[i].op_context;
    entries[i].flags = data[i].flags;
    entries[i].len = data[i].len;
    entries[i].buf = data[i].buf;
    entries[i].data = data[i].data;
    entries[i].tag = 0;
  }
  return read;
}

void Endpoint::deliver(fi_cq_tagged_entry* entries, ssize_t count) {
  if (!test_aids_ || !test_aids_->reorder.active()) [[likely]] {
    for (ssize_t i = 0; i < count; ++i) dispatch(entries[i]);
    return;
  }
  if (pooled_ && !weft_matching_) {
    // The provider matches tagged messages in their order; its pool
    // completions come in that order, as the matcher must see them.
    ssize_t kept = 0;
    for (ssize_t i = 0; i < count; ++i) {
      if (is_pool_op(entries[i].op_context)) {
        dispatch(entries[i]);
      } else {
        entries[kept++] = entries[i];
      }
    }
    count = kept;
  }
  test_aids_->reorder.pass(entries, static_cast<size_t>(count),
                           [this](const fi_cq_tagged_entry& entry) { dispatch(entry); });
}

void Endpoint::dispatch(const fi_cq_tagged_entry& entry) {
  if (test_aids_ && local_transfer(entry.flags)) [[unlikely]]
    test_aids_->held_injects.tracked_done();
  if (is_pool_op(entry.op_context)) {
    receive_message(entry, static_cast<int>(static_cast<OpContext*>(entry.op_context)->slot));
    return;
  }
  if ((entry.flags & FI_REMOTE_WRITE) != 0 && (entry.flags & FI_REMOTE_CQ_DATA) != 0) {
    // A peer's data write: the immediate names the receiving comm.
    auto index = static_cast<uint16_t>(entry.data >> 16);
    RemoteWriteTarget* target = write_targets_.empty() ? nullptr : write_targets_[index];
    if (target == nullptr) {
      WEFT_WARN(
          "%s: dropping a remote write for receiver %u, which does not exist (immediate "
          "0x%08llx): a peer's protocol error or a comm closed mid-transfer",
          device_name_.c_str(), index, (unsigned long long)entry.data);
      return;
    }
    target->on_remote_write(static_cast<uint32_t>(entry.data), entry.len);
    return;
  }
  auto* op = static_cast<OpContext*>(entry.op_context);
  if (op == nullptr || op->target == nullptr) return;
  const uint64_t* data = (entry.flags & FI_REMOTE_CQ_DATA) ? &entry.data : nullptr;
  op->target->on_complete(op->slot, entry.len, data);
}

// The RDMA protocol's message pool --------------------------------------------

bool Endpoint::is_pool_op(const void* op_context) const {
  if (!pool_ops_ || op_context == nullptr) return false;
  auto* op = static_cast<const OpContext*>(op_context);
  return op >= pool_ops_.get() && op < pool_ops_.get() + kPoolSlots;
}

void Endpoint::repost_pool_slots() {
  while (!unposted_.empty()) {
    int slot = unposted_.back();
    unposted_.pop_back();
    post_pool_slot(slot);
    if (!unposted_.empty() && unposted_.back() == slot) break;  // still EAGAIN
  }
}

void Endpoint::post_pool_slot(int slot) {
  uint8_t* buffer = pool_.get() + static_cast<size_t>(slot) * pool_slot_size_;
  fi_context2* context = &pool_ops_[slot].provider_context;
  // Tagged: any tag (every tagged message of this protocol is a control one).
  ssize_t rc = weft_matching_ ? fi_recv(ep_.get(), buffer, pool_slot_size_, pool_descriptor_,
                                        FI_ADDR_UNSPEC, context)
                              : fi_trecv(ep_.get(), buffer, pool_slot_size_, pool_descriptor_,
                                         FI_ADDR_UNSPEC, 0, ~0ull, context);
  if (rc == 0) return;
  if (rc == -FI_EAGAIN) {
    unposted_.push_back(slot);  // posted again by a later poll()
    return;
  }
  WEFT_WARN("%s: posting a message receive buffer failed: %s; one fewer of %d stays posted",
            device_name_.c_str(), fi_strerror((int)-rc), kPoolSlots);
}

void Endpoint::receive_message(const fi_cq_tagged_entry& entry, int slot) {
  if ((entry.flags & FI_REMOTE_WRITE) != 0) {
    // FI_RX_CQ_DATA: a peer's write used up one of our receives.
    fi_cq_tagged_entry write = entry;
    write.op_context = nullptr;
    dispatch(write);
    return_pool_slot(slot);
    return;
  }
  const bool has_data = (entry.flags & FI_REMOTE_CQ_DATA) != 0;
  if (weft_matching_ && !has_data) {
    WEFT_WARN("%s: dropping a message of %zu bytes that carries no tag (not from weft?)",
              device_name_.c_str(), entry.len);
    return_pool_slot(slot);
    return;
  }
  // A tagged message that is no control message (a hostile or confused
  // peer) would otherwise be held for a receive never posted, using up
  // the pool: drop it, as a message for a closed id is.
  uint32_t control = 0;
  if (!weft_matching_ && !compact_tag(entry.tag, &control)) {
    return_pool_slot(slot);
    return;
  }
  // Under weft's matching the CQ data is the compact tag, not the sender's.
  const bool arrived =
      weft_matching_
          ? matcher_->arrive(expand_tag(static_cast<uint32_t>(entry.data)), slot, entry.len)
          : matcher_->arrive(entry.tag, slot, entry.len, has_data ? &entry.data : nullptr);
  if (arrived) return_pool_slot(slot);
  deliver_matched();
}

void Endpoint::pool_error(const fi_cq_err_entry& error, int slot) {
  // Cancelled only when the endpoint closes; anything else loses a message.
  if (error.err == FI_ECANCELED) return;
  WEFT_WARN("%s: a message receive buffer failed: %s (%zu bytes beyond its %zu)",
            device_name_.c_str(), fi_strerror(error.err), error.olen, pool_slot_size_);
  return_pool_slot(slot);
}

void Endpoint::deliver_matched() {
  matcher_->drain([](const MessageMatcher::Completion& done) {
    OpContext* op = done.context;
    if (op == nullptr || op->target == nullptr) return;
    if (done.error == 0) {
      // Plain messages: what the sender's immediate would have said (the size).
      uint64_t data = done.has_data ? done.data : done.length;
      op->target->on_complete(op->slot, done.length, &data);
    } else {
      op->target->on_error(op->slot, done.error, done.overflow,
                           done.error == kTruncated ? "message truncated" : "cancelled");
    }
  });
}

uint16_t Endpoint::attach_write_target(RemoteWriteTarget* target) {
  std::lock_guard<std::mutex> lock(domain_.io_mutex());
  if (free_write_targets_.empty()) return 0;
  uint16_t index = free_write_targets_.back();
  free_write_targets_.pop_back();
  write_targets_[index] = target;
  return index;
}

bool Endpoint::attach_eager_sink(uint64_t tag, EagerSink* sink) {
  std::lock_guard<std::mutex> lock(domain_.io_mutex());
  if (!pooled_) return false;
  matcher_->attach_sink(tag, sink);
  return true;
}

void Endpoint::detach_eager_sink(uint64_t tag) {
  std::lock_guard<std::mutex> lock(domain_.io_mutex());
  if (pooled_) matcher_->detach_sink(tag);
}

void Endpoint::detach_write_target(uint16_t index) {
  if (index == 0) return;
  std::lock_guard<std::mutex> lock(domain_.io_mutex());
  write_targets_[index] = nullptr;
  free_write_targets_.push_back(index);
}

}  // namespace weft::ofi
