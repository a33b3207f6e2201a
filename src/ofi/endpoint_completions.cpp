// Reading the completion queue and handing each entry to what it belongs
// to: the operation's target, or the receiver a peer's write names.
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>

#include "ofi/endpoint.h"
#include "weft/log.h"

namespace weft::ofi {

ncclResult_t Endpoint::poll() {
  fi_cq_tagged_entry entries[kMaxBatch];
  // Completion callbacks run under the lock; they only record results.
  std::lock_guard<std::mutex> lock(io_mutex_);
  ssize_t count = fi_cq_read(cq_.get(), entries, static_cast<size_t>(cq_read_count_));
  if (count > 0) {
    deliver(entries, count);
    return ncclSuccess;
  }
  if (count == -FI_EAGAIN) {
    deliver(entries, 0);
    return ncclSuccess;
  }
  if (count == -FI_EAVAIL) {
    fi_cq_err_entry error{};
    ssize_t rc = fi_cq_readerr(cq_.get(), &error, 0);
    if (rc < 0) return rc == -FI_EAGAIN ? ncclSuccess : fail("fi_cq_readerr", (int)rc);
    char text[256];
    const char* detail =
        fi_cq_strerror(cq_.get(), error.prov_errno, error.err_data, text, sizeof(text));
    auto* op = static_cast<OpContext*>(error.op_context);
    if (op != nullptr && op->target != nullptr) {
      int code = error.err == FI_ETRUNC ? kTruncated : error.err;
      op->target->on_error(op->slot, code, error.olen, detail != nullptr ? detail : "");
    } else {
      WEFT_WARN("%s: completion error without context: %s (%s)", device_name_.c_str(),
                fi_strerror(error.err), detail != nullptr ? detail : "");
    }
    return ncclSuccess;
  }
  if (!cq_failed_.exchange(true)) fail("fi_cq_read", static_cast<int>(count));
  return ncclSystemError;
}

void Endpoint::deliver(fi_cq_tagged_entry* entries, ssize_t count) {
  if (!reorder_.active()) {
    for (ssize_t i = 0; i < count; ++i) dispatch(entries[i]);
    return;
  }
  reorder_.pass(entries, static_cast<size_t>(count),
                [this](const fi_cq_tagged_entry& entry) { dispatch(entry); });
}

void Endpoint::dispatch(const fi_cq_tagged_entry& entry) {
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

uint16_t Endpoint::attach_write_target(RemoteWriteTarget* target) {
  std::lock_guard<std::mutex> lock(io_mutex_);
  if (free_write_targets_.empty()) return 0;
  uint16_t index = free_write_targets_.back();
  free_write_targets_.pop_back();
  write_targets_[index] = target;
  return index;
}

void Endpoint::detach_write_target(uint16_t index) {
  if (index == 0) return;
  std::lock_guard<std::mutex> lock(io_mutex_);
  write_targets_[index] = nullptr;
  free_write_targets_.push_back(index);
}

}  // namespace weft::ofi
