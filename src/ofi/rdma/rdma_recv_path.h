// Receive side of the RDMA protocol. irecv tells the sender where the
// buffers are (one clear-to-send message per group); the sender writes the
// data with fi_writedata and its immediate names slot, entry and segment
// here. Small messages arrive eagerly in bounce buffers instead, possibly
// before their irecv, and are copied into place. Nothing assumes an order
// among these completions.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/chunked_array.h"
#include "core/connection_fault.h"
#include "core/request_pool.h"
#include "ofi/endpoint/completion.h"
#include "ofi/endpoint/endpoint.h"
#include "ofi/endpoint/path_peer.h"
#include "ofi/rdma/rdma_recv_request.h"
#include "ofi/wire/rdma_wire.h"

namespace weft::ofi {

class RdmaRecvPath final : public CompletionTarget, public RemoteWriteTarget, public EagerSink {
 public:
  // rails[0] carries clear-to-sends and eager messages; data writes may
  // arrive on any rail.
  RdmaRecvPath(std::vector<Endpoint*> rails, PathPeer peer, size_t eager_size, int bounce_count);
  ~RdmaRecvPath();
  RdmaRecvPath(const RdmaRecvPath&) = delete;
  RdmaRecvPath& operator=(const RdmaRecvPath&) = delete;

  // Registers the buffers, claims an immediate target, posts the bounce
  // receives. The ack tells the sender write_target() and eager_size().
  ncclResult_t start();
  uint16_t write_target(int rail) const { return write_targets_[rail]; }
  int rails() const { return static_cast<int>(rails_.size()); }
  uint32_t eager_size() const { return static_cast<uint32_t>(eager_size_); }
  bool needs_size_notices() const { return needs_notices_; }

  ncclResult_t irecv(int n, void** data, const size_t* sizes, const int* tags, void** mhandles,
                     Request** request);
  // Polls the rails, places what arrived, sends the clear-to-sends due;
  // once the connection failed, returns that failure.
  ncclResult_t progress();
  // A finished receive back to the pool.
  void recycle(RdmaRecvRequest* request);
  ncclResult_t report_failure(int error, size_t overflow_length, size_t posted_size,
                              const char* text);
  bool in_flight();
  void cancel_receives();

  // Bounce buffer completions (slot = bounce index).
  void on_complete(uint32_t slot, size_t length, const uint64_t* remote_data) override;
  void on_error(uint32_t slot, int error, size_t overflow_length, const char* text) override;
  void on_remote_write(uint32_t immediate, size_t length) override;
  // An eager message straight from the endpoint's message pool: placed
  // into its receive when that is posted, in host memory, and nothing
  // before it waits in a bounce buffer; anything else goes the bounce path.
  bool take(const uint8_t* bytes, size_t length, const uint64_t* data, bool behind) override;

 private:
  static constexpr uint32_t kCtsOp = RdmaRecvRequest::kCtsOp;
  // Requests and their slots are allocated this many at a time.
  static constexpr size_t kSlotChunk = 8;
  // Bounce buffers a comm starts with; it gets the rest of eager_buffers
  // once eager messages arrive faster than it hands them out (every one of
  // them full at once). A comm that sends one message at a time (latency
  // bound, or idle) never needs more.
  static constexpr int kFirstBounces = 2;

  struct Entry {
    void* data = nullptr;
    size_t posted = 0;
    const void* region = nullptr;  // MemoryRegion
    int32_t tag = 0;
    bool claimed = false;  // an eager message, a write or a size notice named it
    bool eager = false;    // filled by an eager message
    uint8_t segments = 0;
    uint16_t arrived = 0;  // bit per segment
    size_t received = 0;
    bool noticed = false;  // the size notice arrived
    size_t notice_size = 0;
  };
  struct Slot {
    RdmaRecvRequest* request = nullptr;
    uint32_t group_seq = 0;
    uint32_t first_index = 0;
    int count = 0;
    Entry entries[kRdmaMaxEntries];
    // Entries filled eagerly, for filled_eagerly() without the lock (the
    // comm's thread asks; take() may count on another thread).
    std::atomic<int> eager_entries{0};
    // Its encoded clear-to-send until sent (cts_stride_ bytes), allocated
    // on the slot's first use.
    std::unique_ptr<uint8_t[]> unsent_cts;
  };
  // Walk over the clear-to-sends not sent yet (resolve_unsent).
  // kIdle: as kFilledOnly, from a progress() call that placed nothing.
  enum class Unsent { kFilledOnly, kIdle, kAll };
  // One state per bounce buffer, so the polling thread and the comm's
  // thread never see it half-changed.
  enum BounceState : uint8_t { kIdle, kPosted, kArrived, kCopying };
  struct Bounce {
    OpContext op;
    // Its eager data's copy into GPU memory: one at a time (kCopying).
    OpContext copy_op;
    std::atomic<uint8_t> state{kIdle};
    size_t length = 0;
    bool has_immediate = false;
    uint64_t immediate = 0;  // the eager immediate (rdma_wire.h)
  };
  // Eager copies into GPU memory (slot = (request slot * 8 + entry) << 8 | bounce).
  struct CopyTarget final : CompletionTarget {
    explicit CopyTarget(RdmaRecvPath* owner) : path(owner) {}
    void on_complete(uint32_t slot, size_t length, const uint64_t* remote_data) override;
    void on_error(uint32_t slot, int error, size_t overflow_length, const char* text) override;
    RdmaRecvPath* path;
  };
  // A clear-to-send on its way, sent from the endpoint's copy `copy`
  // (control_send_copies.h). Its receive does not wait for the send's
  // completion: once eager messages filled it, the receive is done even if
  // the sender closed meanwhile and the send to it takes seconds to fail.
  // The copy stays taken until then.
  struct CtsSend {
    OpContext op;
    std::atomic<bool> busy{false};
    std::atomic<bool> lost{false};  // failed; judged by the comm's thread
    int copy = -1;
    int error = 0;
    int request_slot = 0;
    uint32_t group_seq = 0;
  };
  struct CtsTarget final : CompletionTarget {
    explicit CtsTarget(RdmaRecvPath* owner) : path(owner) {}
    void on_complete(uint32_t slot, size_t length, const uint64_t* remote_data) override;
    void on_error(uint32_t slot, int error, size_t overflow_length, const char* text) override;
    RdmaRecvPath* path;
  };

  // Bounces [0, first_bounces_) live in block 0, the rest in block 1.
  int block_of(int index) const { return index < first_bounces_ ? 0 : 1; }
  uint8_t* bounce_data(int index) {
    const int first = block_of(index) == 0 ? 0 : first_bounces_;
    return bounce_blocks_[block_of(index)].get() +
           static_cast<size_t>(index - first) * bounce_stride_;
  }
  void* bounce_region(int index) const { return bounce_regions_[block_of(index)]; }
  // Allocates and registers block `block` of bounce buffers [first, last).
  ncclResult_t add_bounce_block(int block, int first, int last);
  // Gives the comm the rest of its bounce buffers (block 1).
  void grow_bounces();
  Slot& slot_at(int s) { return *slots_.find(static_cast<size_t>(s)); }
  uint8_t* unsent_cts(int s) { return slot_at(s).unsent_cts.get(); }
  // Registered copies of clear-to-sends on their way, by CtsSend; only for
  // providers that cannot inject them, so allocated on first use.
  ncclResult_t post_bounce(int index);
  // Sends the clear-to-send of slot `s` (encoded in unsent_cts(s)) from a
  // free buffer; a failure to post fails its request. False when the
  // provider said EAGAIN or every buffer is on its way.
  bool send_cts(int s);
  // Settles held-back clear-to-sends in group order: a group that eager
  // messages filled is skipped (the next clear-to-send sent speaks for it),
  // unless the run of skipped groups is as long as the sender may wait for;
  // the first group still waiting for data stops the walk, unless `kAll`
  // or it has waited kStallTime (its sender may need the clear-to-send:
  // a message larger than its receive).
  ncclResult_t resolve_unsent(Unsent which);
  // Every entry of the slot's group was named by an eager message.
  bool filled_eagerly(int s);
  // Places the eager messages that arrived. Emptied buffers are posted
  // again by progress() (kIdle), not by irecv (kLater): that is on the
  // path of every message.
  enum class Repost { kIdle, kLater };
  ncclResult_t service(Repost repost);
  // Lost clear-to-sends, after service() placed what arrived: the
  // connection fails only where the group still needs the sender.
  void judge_lost_cts();
  // Matches one eager message; false when its receive is not posted yet.
  bool place_eager(int bounce, ncclResult_t* result);
  // Under state_mutex_: the unclaimed entry of eager message #message
  // with `tag`; kAhead and kNoMatch are the sender's protocol errors.
  enum class EagerLookup { kFound, kNotPosted, kAhead, kNoMatch };
  EagerLookup find_eager_entry(uint32_t message, int32_t tag, int* slot_index, int* entry_index);
  // Under state_mutex_: take()'s placement; false when the bounce path
  // must handle the message (not posted, GPU memory, truncated, a notice,
  // malformed: judged there).
  bool place_from_pool(const uint8_t* bytes, size_t length, const uint64_t* data);
  // Fills (or, truncated, fails) the entry of message `index` with `tag`
  // from `size` bytes at `data` in bounce `bounce`.
  bool fill_entry(int bounce, uint32_t index, int32_t tag, uint64_t size, bool truncated,
                  const uint8_t* data, ncclResult_t* result);
  [[gnu::cold]] void fail(const std::string& problem);
  // The clear-to-send of `request` could not be posted: the sender will
  // never write that receive, so the connection fails and test() ends.
  [[gnu::cold]] void cts_failed(RdmaRecvRequest* request, int error, const char* text);
  // Completes a written entry once every segment (and its size notice, where
  // needed) arrived. Called with state_mutex_ held.
  void complete_if_written(Slot& slot, int entry);
  // A size notice for message `index`, entry `entry`.
  void take_size_notice(const EagerHeader& header);
  ncclResult_t poll_rails();
  int slot_of(const RdmaRecvRequest* request) const { return pool_.index_of(request); }

  std::vector<Endpoint*> rails_;
  Endpoint& endpoint_;  // rails_[0]
  PathPeer peer_;
  size_t eager_size_;
  size_t bounce_stride_;
  uint16_t write_targets_[kMaxRails] = {};
  uint32_t next_index_ = 0;
  uint32_t next_group_ = 0;
  std::unique_ptr<Bounce[]> bounces_;  // bounce_count_ states, first_bounces_ .. in use
  int bounce_count_;
  int first_bounces_;
  int active_bounces_;          // first_bounces_, or bounce_count_ once grown
  bool bounces_grown_ = false;  // or growing failed: not tried again
  std::unique_ptr<uint8_t[]> bounce_blocks_[2];
  void* bounce_regions_[2] = {};
  bool closing_ = false;
  // Sized for this connection's rails, not kMaxRails: 276 bytes instead
  // of 1,172 on one rail.
  size_t cts_stride_;
  CtsSend cts_sends_[kRdmaSlots];
  CtsTarget cts_target_{this};
  std::atomic<int> lost_cts_{0};
  // Slots whose clear-to-send is not sent yet, in group order (comm thread
  // only). Every message of a group whose receives all fit the eager size
  // goes eagerly and never waits for it: the sender needs it only to move
  // its bookkeeping on, so it waits here, and once eager messages filled
  // the group it is not sent at all (one clear-to-send per run of such
  // groups instead of one per group).
  uint8_t unsent_[kRdmaSlots] = {};
  uint32_t unsent_head_ = 0;
  uint32_t unsent_tail_ = 0;
  // Groups skipped since the last clear-to-send sent, and their messages:
  // the sender stays at most eager_ahead messages past the first of them,
  // so a run ends (its next clear-to-send goes) before it holds
  // skip_limit_ messages, leaving room for a whole deferrable group.
  uint16_t skipped_groups_ = 0;
  uint32_t skipped_messages_ = 0;
  uint32_t skip_limit_;
  int deferrable_entries_;      // the largest group held back
  bool eager_sendable_ = true;  // the sender sends messages up to eager_size_ eagerly
  // How long the oldest held-back group has waited for data.
  uint32_t head_polls_ = 0;
  std::atomic<uint64_t> placed_{0};  // eager messages placed, to tell an idle progress()
  // Eager messages take() left to the bounce path and not placed yet:
  // later ones follow them there, so that messages with one tag fill
  // their receives in the order they were sent.
  std::atomic<int> declined_{0};
  bool sink_attached_ = false;
  // Data messages placed by take() and from bounce buffers (logged at close).
  std::atomic<uint64_t> placed_from_pool_{0};
  uint64_t placed_from_bounces_ = 0;
  std::chrono::steady_clock::time_point head_since_{};
  CopyTarget copy_target_{this};
  // slots_ (and allocating its chunks): the comm's thread and the polling thread
  std::mutex state_mutex_;
  ChunkedArray<Slot, kRdmaSlots, kSlotChunk> slots_;
  bool needs_notices_ = false;
  ConnectionFault fault_;
  RequestPool<RdmaRecvRequest, kRdmaSlots, kSlotChunk> pool_;
};

}  // namespace weft::ofi
