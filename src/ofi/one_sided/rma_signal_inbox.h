// Signals as messages, for providers without remote atomics (libfabric
// 2.x's tcp and verbs;ofi_rxm): a sender posts the signal, once the data
// before it is delivered, as a 32-byte tagged message (rma_record.h); the
// target keeps receives posted for them and adds each message's value in
// its progress. The word is written by this process alone, with a 64-bit
// atomic add, so adds from several ranks never mix.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "core/completion_target.h"
#include "nccl/types.h"
#include "ofi/endpoint/completion.h"

namespace weft::ofi {

class OfiRmaComm;

class RmaSignalInbox final : public CompletionTarget {
 public:
  static constexpr int kSlots = 64;

  explicit RmaSignalInbox(OfiRmaComm& comm) : comm_(comm) {}
  ~RmaSignalInbox();
  // Registers the slots and posts a receive in each.
  ncclResult_t open(uint64_t tag);
  // Posts again the slots whose message was applied.
  ncclResult_t repost();
  // Cancels the posted receives and waits (briefly) for the provider to
  // let go of them; false when it would not.
  bool close();

  void on_complete(uint32_t slot, size_t length, const uint64_t* remote_data) override;
  void on_error(uint32_t slot, int error, size_t overflow_length, const char* text) override;

 private:
  enum : uint8_t { kPosted = 0, kConsumed = 1, kIdle = 2 };
  ssize_t post(int slot);

  OfiRmaComm& comm_;
  uint64_t tag_ = 0;
  std::vector<uint8_t> buffer_;
  void* region_ = nullptr;
  OpContext ops_[kSlots];
  std::atomic<uint8_t> state_[kSlots];
  std::atomic<int> consumed_{0};
  std::mutex repost_mutex_;
};

}  // namespace weft::ofi
