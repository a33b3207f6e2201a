// Tag matching done by weft for the RDMA protocol's connection,
// clear-to-send and eager messages. The endpoint keeps one pool of receive
// buffers for all of them, whatever comm they are for, so that a thousand
// comms do not each keep receives posted in the provider's receive queue
// (shm has 1024 per endpoint). This matcher pairs each arrival with the
// oldest receive posted for its tag, as the provider would. A message with
// no receive posted yet stays in its pool buffer until one is (the
// provider's unexpected queue). On fabrics without FI_TAGGED (efa's
// efa-direct) these messages are plain ones with a compact form of their
// tag in remote CQ data; elsewhere they are tagged, and the pool's tagged
// receives take any tag.
//
// Plain logic, no libfabric calls: the endpoint posts and reposts the pool
// buffers and delivers the completions this matcher queues. Nothing here
// allocates per message once a tag has been seen.
#pragma once

#include <cstddef>
#include <cstdint>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "ofi/endpoint/completion.h"

namespace weft::ofi {

// The compact tag: kind (connect, ack, clear-to-send, eager) in the top two
// bits, the 30-bit id below. Only control tags have one.
bool compact_tag(uint64_t tag, uint32_t* compact);
uint64_t expand_tag(uint32_t compact);
// Ids that fit a compact tag.
constexpr uint32_t kMaxCompactId = (1u << 30) - 1;

// Takes a comm's eager messages straight from the pool buffer they arrived
// in, before the matcher looks for a posted receive: the data is copied
// once, into the application's buffer, instead of into a bounce buffer
// first. Called under the endpoint's I/O lock, possibly on another comm's
// thread.
class EagerSink {
 public:
  // True when the message was used up (placed); false leaves it to the
  // matcher, as without a sink. `behind`: earlier messages for this tag
  // are held, so this one must wait its turn too.
  virtual bool take(const uint8_t* bytes, size_t length, const uint64_t* data, bool behind) = 0;

 protected:
  ~EagerSink() = default;
};

class MessageMatcher {
 public:
  // A completion made by the matcher, delivered by the endpoint's poll().
  struct Completion {
    OpContext* context = nullptr;
    size_t length = 0;
    int error = 0;          // 0, kTruncated or FI_ECANCELED
    size_t overflow = 0;    // bytes beyond the posted size
    bool has_data = false;  // the message's remote CQ data (tagged messages)
    uint64_t data = 0;
  };

  // Pool buffer `slot` begins at pool + slot * slot_size.
  MessageMatcher(int pool_slots, uint8_t* pool, size_t slot_size);

  // A receive posted for `tag`. When a held message matches, it is copied
  // and its pool slot is returned in `released` (else -1).
  void post(uint64_t tag, void* buffer, size_t size, OpContext* context, int* released);
  // A message of `length` bytes for `tag` arrived in pool slot `slot`,
  // with remote CQ data `data` when not null. True when it was delivered
  // and the slot can be posted again; false when the matcher holds it for
  // a later receive.
  bool arrive(uint64_t tag, int slot, size_t length, const uint64_t* data = nullptr);
  // Removes a posted receive, queuing its cancellation. False when the
  // context is not posted here (already matched). Finds it through the
  // context, not by a scan: closing ten thousand comms cancels all theirs.
  bool cancel(OpContext* context);
  // Arrivals for `tag` are offered to `sink` first, until detached.
  void attach_sink(uint64_t tag, EagerSink* sink);
  void detach_sink(uint64_t tag);

  // Every tag addressed to this endpoint names an id this endpoint gave out
  // (a listener's or a comm's). Messages for an id that is not open are
  // dropped on arrival, and closing an id drops what it held: a closed comm
  // never posts again, and its messages must not use up the pool.
  void open_id(uint32_t id);
  // Appends the pool slots it held to `released`.
  void close_id(uint32_t id, std::vector<int>* released);
  uint64_t dropped() const { return dropped_; }

  // Hands every queued completion to `deliver(const Completion&)`.
  template <typename Deliver>
  void drain(Deliver&& deliver) {
    // Delivery may post again (and so queue more): take the batch first.
    draining_.swap(completions_);
    for (const Completion& completion : draining_) deliver(completion);
    draining_.clear();
  }
  bool has_completions() const { return !completions_.empty(); }
  int held() const { return held_; }

 private:
  struct Posted {
    uint64_t tag = 0;
    void* buffer = nullptr;
    size_t size = 0;
    OpContext* context = nullptr;
    int next = -1;
  };
  struct Queues {
    int posted_head = -1, posted_tail = -1;  // indices into posted_
    int held_head = -1, held_tail = -1;      // pool slots, linked by held_next_
    EagerSink* sink = nullptr;
  };

  void complete(const Posted& posted, int slot, size_t length);
  int new_posted();

  uint8_t* pool_;
  size_t slot_size_;
  std::vector<size_t> held_length_;  // by pool slot
  std::vector<uint8_t> held_has_data_;
  std::vector<uint64_t> held_data_;
  std::vector<int> held_next_;  // by pool slot
  std::vector<Posted> posted_;
  int free_posted_ = -1;
  int held_ = 0;
  uint64_t dropped_ = 0;
  std::unordered_set<uint32_t> open_ids_;
  std::unordered_map<uint64_t, Queues> queues_;
  std::vector<Completion> completions_, draining_;
};

}  // namespace weft::ofi
