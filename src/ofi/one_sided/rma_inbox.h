// What reaches a one-sided comm over libfabric as messages, on one tag:
//
// - signals, for providers without remote atomics (libfabric 2.x's tcp and
//   verbs;ofi_rxm): a sender posts the signal, once the data before it is
//   delivered, as a 32-byte tagged message (rma_record.h); the word is
//   written by this process alone, with a 64-bit atomic add, so adds from
//   several ranks never mix. Applied as it completes.
// - windows on demand (symmetric_comm.h): 56-byte asks for this rank's copy
//   of a region and answers to this rank's asks. Each is proven to come
//   from the rank it names before anything else is read, and handed to the
//   comm in progress (service), outside the completion lock, since an ask
//   is answered with a send.
//
// The same object sends the asks and answers: from slots of their own,
// waiting in a queue while all are in flight, so a sender never blocks.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/completion_target.h"
#include "core/rma_record.h"
#include "nccl/types.h"
#include "ofi/endpoint/completion.h"

namespace weft::ofi {

class OfiRmaComm;

class RmaInbox final : public CompletionTarget {
 public:
  static constexpr int kReceiveSlots = 64;
  static constexpr int kSendSlots = 16;

  explicit RmaInbox(OfiRmaComm& comm) : comm_(comm) {}
  ~RmaInbox();
  // Registers the slots and posts a receive in each, for `tag`.
  ncclResult_t open(uint64_t tag);
  // Queues `record` for `rank` (whose comm has id `peer_id`) and sends it
  // once a send slot is free.
  void send(uint32_t rank, uint32_t peer_id, const RmaRecord& record);
  // Hands the records that arrived to the comm, posts their slots again,
  // sends what waits, and reports sends that failed.
  ncclResult_t service();
  // Cancels the posted receives and waits (briefly) for the provider to
  // let go of them and of the sends; false when it would not.
  bool close();

  void on_complete(uint32_t slot, size_t length, const uint64_t* remote_data) override;
  void on_error(uint32_t slot, int error, size_t overflow_length, const char* text) override;

 private:
  // Receive slots: posted, done with (to post again), idle (never posted,
  // cancelled or failed), or holding a record for service. Send slots:
  // free, in flight, or failed (error_ says why).
  static constexpr uint8_t kPosted = 0, kConsumed = 1, kIdle = 2, kHeld = 3;
  static constexpr uint8_t kFree = 0, kInFlight = 1, kFailed = 2;
  struct Outgoing {
    uint32_t rank = 0;
    uint32_t peer_id = 0;
    RmaRecord record;
  };
  static constexpr int kSlots = kReceiveSlots + kSendSlots;

  uint8_t* slot_bytes(int slot) { return buffer_.data() + kRmaRecordSize * slot; }
  ssize_t post(int slot);
  ncclResult_t repost();
  void handle(int slot);
  // Posts queued records into free send slots; what could not reach its
  // rank goes to *failed. Under send_mutex_.
  void flush(std::vector<std::pair<Outgoing, std::string>>* failed);

  OfiRmaComm& comm_;
  uint64_t tag_ = 0;
  std::vector<uint8_t> buffer_;
  void* region_ = nullptr;
  OpContext ops_[kSlots];
  std::atomic<uint8_t> state_[kSlots];
  size_t lengths_[kReceiveSlots] = {};
  int errors_[kSendSlots] = {};
  Outgoing in_flight_[kSendSlots];
  // Receive slots to post again or to hand over, send slots done.
  std::atomic<int> attention_{0};
  std::mutex service_mutex_;
  std::mutex send_mutex_;
  std::deque<Outgoing> queue_;  // setup only: at most one ask and one answer per region and rank
};

}  // namespace weft::ofi
