#include "ofi/one_sided/rma_signal_inbox.h"

#include <rdma/fi_errno.h>

#include <chrono>
#include <string>

#include "core/rma_record.h"
#include "ofi/endpoint/memory_region.h"
#include "ofi/one_sided/rma_comm.h"
#include "weft/log.h"

namespace weft::ofi {

RmaSignalInbox::~RmaSignalInbox() {
  if (region_ != nullptr) {
    deregister_memory(&comm_.endpoint(), comm_.device_name(), region_);
  }
}

ncclResult_t RmaSignalInbox::open(uint64_t tag) {
  tag_ = tag;
  buffer_.assign(kRmaSignalSize * kSlots, 0);
  ncclResult_t result =
      register_memory(comm_.endpoint(), buffer_.data(), buffer_.size(), MemorySource{}, &region_);
  if (result != ncclSuccess) return result;
  for (int slot = 0; slot < kSlots; ++slot) {
    ops_[slot].target = this;
    ops_[slot].slot = static_cast<uint32_t>(slot);
    state_[slot].store(kIdle, std::memory_order_relaxed);
    consumed_.fetch_add(1, std::memory_order_relaxed);
  }
  return repost();
}

ssize_t RmaSignalInbox::post(int slot) {
  return comm_.endpoint().receive(buffer_.data() + kRmaSignalSize * slot, kRmaSignalSize,
                                  descriptor_of(region_), tag_, &ops_[slot]);
}

ncclResult_t RmaSignalInbox::repost() {
  if (consumed_.load(std::memory_order_acquire) == 0) return ncclSuccess;
  // Every context's progress calls in: one reposts, the others go on.
  std::unique_lock<std::mutex> lock(repost_mutex_, std::try_to_lock);
  if (!lock.owns_lock()) return ncclSuccess;
  for (int slot = 0; slot < kSlots; ++slot) {
    uint8_t state = state_[slot].load(std::memory_order_acquire);
    if (state == kPosted) continue;
    // Posted before the call: its completion may come before it returns.
    state_[slot].store(kPosted, std::memory_order_release);
    consumed_.fetch_sub(1, std::memory_order_acq_rel);
    ssize_t rc = post(slot);
    if (rc == 0) continue;
    state_[slot].store(state, std::memory_order_release);
    consumed_.fetch_add(1, std::memory_order_acq_rel);
    if (rc == -FI_EAGAIN) return ncclSuccess;  // the next progress tries again
    WEFT_WARN("%s: posting a receive for signal messages failed: %s", comm_.device_name().c_str(),
              fi_strerror(static_cast<int>(-rc)));
    return ncclSystemError;
  }
  return ncclSuccess;
}

void RmaSignalInbox::on_complete(uint32_t slot, size_t length, const uint64_t*) {
  RmaSignal signal;
  std::string error;
  if (!decode_rma_signal(buffer_.data() + kRmaSignalSize * slot, length,
                         static_cast<uint32_t>(comm_.rank_count()), &signal, &error)) {
    WEFT_WARN("%s: a signal message is refused: %s", comm_.device_name().c_str(), error.c_str());
  } else {
    comm_.apply_signal(signal, comm_.endpoint().provider_name());
  }
  state_[slot].store(kConsumed, std::memory_order_release);
  consumed_.fetch_add(1, std::memory_order_acq_rel);
}

void RmaSignalInbox::on_error(uint32_t slot, int error, size_t, const char* text) {
  if (error != FI_ECANCELED) {
    WEFT_WARN("%s: a signal message's receive failed: %s (%s)", comm_.device_name().c_str(),
              fi_strerror(error), text != nullptr ? text : "");
  }
  state_[slot].store(kIdle, std::memory_order_release);
  consumed_.fetch_add(1, std::memory_order_acq_rel);
}

bool RmaSignalInbox::close() {
  for (int slot = 0; slot < kSlots; ++slot) {
    if (state_[slot].load(std::memory_order_acquire) == kPosted) {
      comm_.endpoint().cancel(&ops_[slot]);
    }
  }
  auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(1);
  auto posted = [&] {
    for (int slot = 0; slot < kSlots; ++slot)
      if (state_[slot].load(std::memory_order_acquire) == kPosted) return true;
    return false;
  };
  while (posted() && std::chrono::steady_clock::now() < give_up) {
    if (comm_.endpoint().poll() != ncclSuccess) break;
  }
  return !posted();
}

}  // namespace weft::ofi
