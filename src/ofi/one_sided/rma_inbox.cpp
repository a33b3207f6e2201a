#include "ofi/one_sided/rma_inbox.h"

#include <rdma/fi_errno.h>

#include <chrono>
#include <string>

#include "ofi/endpoint/memory_region.h"
#include "ofi/endpoint/tag_layout.h"
#include "ofi/one_sided/rma_comm.h"
#include "weft/log.h"

namespace weft::ofi {

RmaInbox::~RmaInbox() {
  if (region_ != nullptr) {
    deregister_memory(&comm_.endpoint(), comm_.device_name(), region_);
  }
}

ncclResult_t RmaInbox::open(uint64_t tag) {
  tag_ = tag;
  buffer_.assign(kRmaRecordSize * kSlots, 0);
  ncclResult_t result =
      register_memory(comm_.endpoint(), buffer_.data(), buffer_.size(), MemorySource{}, &region_);
  if (result != ncclSuccess) return result;
  for (int slot = 0; slot < kSlots; ++slot) {
    ops_[slot].target = this;
    ops_[slot].slot = static_cast<uint32_t>(slot);
    state_[slot].store(slot < kReceiveSlots ? kIdle : kFree, std::memory_order_relaxed);
  }
  attention_.store(1, std::memory_order_relaxed);
  return repost();
}

ssize_t RmaInbox::post(int slot) {
  return comm_.endpoint().receive(slot_bytes(slot), kRmaRecordSize, descriptor_of(region_), tag_,
                                  &ops_[slot]);
}

ncclResult_t RmaInbox::repost() {
  for (int slot = 0; slot < kReceiveSlots; ++slot) {
    uint8_t state = state_[slot].load(std::memory_order_acquire);
    if (state != kConsumed && state != kIdle) continue;
    // Posted before the call: its completion may come before it returns.
    state_[slot].store(kPosted, std::memory_order_release);
    ssize_t rc = post(slot);
    if (rc == 0) continue;
    state_[slot].store(state, std::memory_order_release);
    attention_.fetch_add(1, std::memory_order_acq_rel);
    if (rc == -FI_EAGAIN) return ncclSuccess;  // the next progress tries again
    WEFT_WARN("%s: posting a receive for one-sided messages failed: %s",
              comm_.device_name().c_str(), fi_strerror(static_cast<int>(-rc)));
    return ncclSystemError;
  }
  return ncclSuccess;
}

void RmaInbox::on_complete(uint32_t slot, size_t length, const uint64_t*) {
  if (slot >= static_cast<uint32_t>(kReceiveSlots)) {
    state_[slot].store(kFree, std::memory_order_release);
    attention_.fetch_add(1, std::memory_order_acq_rel);
    return;
  }
  uint8_t next = kConsumed;
  if (length == kRmaSignalSize) {
    RmaSignal signal;
    std::string error;
    if (!decode_rma_signal(slot_bytes(static_cast<int>(slot)), length,
                           static_cast<uint32_t>(comm_.rank_count()), &signal, &error)) {
      WEFT_WARN("%s: a signal message is refused: %s", comm_.device_name().c_str(), error.c_str());
    } else {
      comm_.apply_signal(signal, comm_.endpoint().provider_name());
    }
  } else {
    // A setup record, or something that is not: service looks at it.
    lengths_[slot] = length;
    next = kHeld;
  }
  state_[slot].store(next, std::memory_order_release);
  attention_.fetch_add(1, std::memory_order_acq_rel);
}

void RmaInbox::on_error(uint32_t slot, int error, size_t, const char* text) {
  if (slot >= static_cast<uint32_t>(kReceiveSlots)) {
    errors_[slot - kReceiveSlots] = error == 0 ? FI_EIO : error;
    state_[slot].store(kFailed, std::memory_order_release);
  } else {
    if (error != FI_ECANCELED) {
      WEFT_WARN("%s: a receive for one-sided messages failed: %s (%s)", comm_.device_name().c_str(),
                fi_strerror(error), text != nullptr ? text : "");
    }
    state_[slot].store(kIdle, std::memory_order_release);
  }
  attention_.fetch_add(1, std::memory_order_acq_rel);
}

void RmaInbox::send(uint32_t rank, uint32_t peer_id, const RmaRecord& record) {
  std::vector<std::pair<Outgoing, std::string>> failed;
  {
    std::lock_guard<std::mutex> lock(send_mutex_);
    queue_.push_back(Outgoing{rank, peer_id, record});
    flush(&failed);
    // A provider still connecting to the rank says EAGAIN: progress retries.
    if (!queue_.empty()) attention_.fetch_add(1, std::memory_order_acq_rel);
  }
  for (auto& [outgoing, why] : failed) {
    comm_.on_demand_send_failed(outgoing.record, outgoing.rank, why);
  }
}

void RmaInbox::flush(std::vector<std::pair<Outgoing, std::string>>* failed) {
  for (int s = 0; s < kSendSlots && !queue_.empty(); ++s) {
    const int slot = kReceiveSlots + s;
    if (state_[slot].load(std::memory_order_acquire) != kFree) continue;
    Outgoing& outgoing = queue_.front();
    std::string error;
    fi_addr_t address = comm_.peer_address(outgoing.rank, &error);
    if (address == FI_ADDR_NOTAVAIL) {
      failed->emplace_back(outgoing, error);
      queue_.pop_front();
      --s;
      continue;
    }
    encode_rma_record(outgoing.record, slot_bytes(slot));
    in_flight_[s] = outgoing;
    state_[slot].store(kInFlight, std::memory_order_release);
    ssize_t rc = comm_.endpoint().send(slot_bytes(slot), kRmaRecordSize, descriptor_of(region_),
                                       address, rma_signal_tag(outgoing.peer_id), &ops_[slot]);
    if (rc == -FI_EAGAIN) {
      state_[slot].store(kFree, std::memory_order_release);
      return;  // the next service tries again
    }
    queue_.pop_front();
    if (rc != 0) {
      state_[slot].store(kFree, std::memory_order_release);
      failed->emplace_back(in_flight_[s], fi_strerror(static_cast<int>(-rc)));
    }
  }
}

void RmaInbox::handle(int slot) {
  comm_.take_on_demand_bytes(slot_bytes(slot), lengths_[slot]);
  state_[slot].store(kConsumed, std::memory_order_release);
}

ncclResult_t RmaInbox::service() {
  if (attention_.load(std::memory_order_acquire) == 0) return ncclSuccess;
  // Every context's progress calls in: one serves, the others go on.
  std::unique_lock<std::mutex> lock(service_mutex_, std::try_to_lock);
  if (!lock.owns_lock()) return ncclSuccess;
  attention_.store(0, std::memory_order_release);
  std::vector<std::pair<Outgoing, std::string>> failed;
  for (int slot = 0; slot < kReceiveSlots; ++slot) {
    if (state_[slot].load(std::memory_order_acquire) == kHeld) handle(slot);
  }
  {
    std::lock_guard<std::mutex> send_lock(send_mutex_);
    for (int s = 0; s < kSendSlots; ++s) {
      const int slot = kReceiveSlots + s;
      if (state_[slot].load(std::memory_order_acquire) != kFailed) continue;
      failed.emplace_back(in_flight_[s], fi_strerror(errors_[s]));
      state_[slot].store(kFree, std::memory_order_release);
    }
    flush(&failed);
    // Records still queued wait for a send slot's completion.
    if (!queue_.empty()) attention_.fetch_add(1, std::memory_order_acq_rel);
  }
  for (auto& [outgoing, why] : failed) {
    comm_.on_demand_send_failed(outgoing.record, outgoing.rank, why);
  }
  return repost();
}

bool RmaInbox::close() {
  for (int slot = 0; slot < kReceiveSlots; ++slot) {
    if (state_[slot].load(std::memory_order_acquire) == kPosted) {
      comm_.endpoint().cancel(&ops_[slot]);
    }
  }
  auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(1);
  auto busy = [&] {
    for (int slot = 0; slot < kSlots; ++slot) {
      uint8_t state = state_[slot].load(std::memory_order_acquire);
      if (slot < kReceiveSlots ? state == kPosted : state == kInFlight) return true;
    }
    return false;
  };
  while (busy() && std::chrono::steady_clock::now() < give_up) {
    if (comm_.endpoint().poll() != ncclSuccess) break;
  }
  return !busy();
}

}  // namespace weft::ofi
