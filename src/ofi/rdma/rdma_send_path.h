// Send side of the RDMA protocol. Clear-to-send messages from the receiver
// arrive in pre-posted buffers; a send waits for the one that covers it,
// then writes its data straight into the posted buffer with fi_writedata.
// Messages up to the eager size go at once into the receiver's bounce
// buffers and complete as soon as the provider sent them (at once when
// injected); their clear-to-send, whenever it comes, only moves the group
// bookkeeping on. The receiver checks their size.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "core/connection_fault.h"
#include "core/request_pool.h"
#include "ofi/endpoint/completion.h"
#include "ofi/endpoint/endpoint.h"
#include "ofi/endpoint/path_peer.h"
#include "ofi/wire/rdma_wire.h"

namespace weft::ofi {

// One rail of a connection as the sender sees it.
struct RdmaRail {
  Endpoint* endpoint = nullptr;
  fi_addr_t peer = FI_ADDR_UNSPEC;
  uint16_t remote_target = 0;  // the receiver's write target on this rail
};

class RdmaSendPath final : public CompletionOwner, public CompletionTarget {
 public:
  // NCCL may keep 32 x maxRecvs sends in flight on one comm.
  static constexpr size_t kPoolSize = kRdmaSlots * kRdmaMaxEntries;

  // rails[0] carries clear-to-sends, eager messages and size notices; data
  // writes go over every rail: messages of at least 2 x min_stripe are
  // split across rails in stripes of at least min_stripe bytes, smaller
  // ones take the rails in turn. Targets and eager_size come from the
  // receiver's acknowledgement. probe_deadline: how long rail 0 may take
  // to carry a probe while a send waits for its clear-to-send (zero: no
  // probes).
  RdmaSendPath(std::vector<RdmaRail> rails, PathPeer peer, size_t eager_size, bool size_notices,
               size_t min_stripe, std::chrono::milliseconds probe_deadline);
  ~RdmaSendPath();
  RdmaSendPath(const RdmaSendPath&) = delete;
  RdmaSendPath& operator=(const RdmaSendPath&) = delete;

  ncclResult_t start();
  ncclResult_t isend(void* data, size_t size, int tag, void* mhandle, Request** request);
  ncclResult_t post(void* data, size_t size, int tag, void* mhandle, Request** request);
  ncclResult_t progress() override;
  void recycle(Request* request) override;
  ncclResult_t report_failure(int error, size_t overflow_length, size_t posted_size,
                              const char* text) override;
  bool in_flight();
  void cancel_receives();
  // Whether an eager message sent still expects the clear-to-send that
  // covers it (the receiver may be sending it now).
  bool awaits_clear_to_send() const;

  // Clear-to-send buffers (slot = buffer index).
  void on_complete(uint32_t slot, size_t length, const uint64_t* remote_data) override;
  void on_error(uint32_t slot, int error, size_t overflow_length, const char* text) override;

 private:
  // Ops: the writes of one message and its size notice, or the eager send
  // (and, for a truncation notice, the failure it reports).
  using SendRequest = CompletionRequest<kRdmaMaxSegments + 1, OpContext, RdmaSendPath>;
  static constexpr int kEagerSendOp = 0;
  static constexpr int kTruncatedOp = 1;

  enum CtsState : uint8_t { kIdle, kPosted, kArrived };
  struct CtsBuffer {
    OpContext op;
    std::atomic<uint8_t> state{kIdle};
    size_t length = 0;
  };
  // A clear-to-send taken in, less its remote addresses and keys, which
  // wait in remote_targets_ (sized for this connection's rails).
  struct Group {
    bool valid = false;
    uint8_t slot = 0;  // the receiver's request slot
    uint8_t count = 0;
    uint32_t first_index = 0;
    uint64_t size[kRdmaMaxEntries] = {};
    int32_t tag[kRdmaMaxEntries] = {};
    bool used[kRdmaMaxEntries] = {};
    int consumed = 0;
  };
  // An eager message whose clear-to-send has not been seen yet: it claims
  // its entry when the clear-to-send comes. At most kRdmaEagerAhead
  // messages go out ahead of the oldest clear-to-send still awaited.
  struct EagerSent {
    bool pending = false;
    int32_t tag = 0;
  };

  ncclResult_t post_cts_receive(int index);
  ncclResult_t service();
  // Files arrived clear-to-sends into groups_, lets eager messages claim
  // their entries, and moves past finished groups.
  ncclResult_t absorb_cts();
  void claim_eager_entries(Group& group);
  void advance_groups();
  // Files a decoded clear-to-send into `group`.
  void take_cts(Group& group, const CtsMessage& cts);
  // Moves past the groups that `cts` says were filled eagerly (they start
  // at group_seq_); false on a fault.
  bool pass_skipped_groups(const CtsMessage& cts);
  // Entry of the current group for message `index` with `tag`, or -1.
  int claim_entry(Group& group, int32_t tag);
  ncclResult_t send_eager(void* data, size_t size, int tag, void* mhandle, bool truncated,
                          size_t posted, Request** request);
  ncclResult_t write_message(Group& group, int entry, void* data, size_t size, void* mhandle,
                             Request** request);
  [[gnu::cold]] void fail(const std::string& problem);
  // Tells the receiver, best effort, that a write failed: its pending
  // receives fail instead of waiting for data that will not come.
  void send_abort_notice();
  // Sends a notice without data from header row `row`: the provider's
  // result (-FI_ENOMEM when the row has no registered memory).
  ssize_t send_notice(const EagerHeader& notice, int row, OpContext* op);
  // Called while a send waits for its clear-to-send. A rail 0 connection
  // that died while idle (reset, or its receiver's queue pair in error)
  // loses the clear-to-send without a word to this side, whose provider
  // fails only operations it has. So once a send has waited a second, a
  // probe gives it one, and another after each longer wait (up to
  // kMaxProbeGap: a provider whose peer process is busy elsewhere, shm,
  // holds each probe in the peer's queue). A probe that fails, or that the
  // provider has not taken and completed within probe_deadline_ (tcp
  // answers FI_EAGAIN while it retries a refused connection), fails the
  // comm instead of leaving the send waiting forever (kProbeFailGrace
  // after a failure). Nothing is sent while sends flow.
  void probe_while_waiting();
  [[gnu::cold]] void fail_probe(const std::string& why);
  ncclResult_t poll_rails();
  int index_of(const SendRequest* request) const { return pool_.index_of(request); }
  uint8_t* cts_bytes(int buffer) { return cts_bytes_.get() + buffer * cts_stride_; }
  // The header row of request `row` (kAbortRow, kProbeRow: the notices'),
  // registering its block on first use; null, logged, where that failed.
  uint8_t* header_row(int row);
  void* header_descriptor(int row) const;
  // Entry `entry` of group `group`: rails_.size() addresses, then as many keys.
  uint64_t* remote_target(const Group& group, int entry) {
    size_t position = static_cast<size_t>(&group - groups_) * kRdmaMaxEntries + entry;
    return remote_targets_.get() + position * 2 * rails_.size();
  }

  std::vector<RdmaRail> rails_;
  Endpoint& endpoint_;  // rails_[0]
  PathPeer peer_;
  size_t eager_size_;
  size_t min_stripe_;
  uint32_t next_rail_ = 0;       // round-robin of messages too small to stripe
  size_t max_write_ = SIZE_MAX;  // the smallest write any rail takes
  // Eager data behind a header (tags that do not fit the eager immediate)
  // needs two iovecs per send; without them such messages are written.
  bool header_eager_ = true;
  // Eager data may travel alone with index and tag in the CQ data; not
  // under weft's matching, whose compact tag takes the CQ data.
  bool immediate_eager_ = true;
  // How far eager messages may run ahead of the oldest clear-to-send still
  // awaited. Under weft's matching, clear-to-sends reach our buffers in any
  // order (unordered fabrics), and one kRdmaSlots or more groups ahead stays
  // in its buffer. The receiver gets that far ahead only by completing
  // groups whose clear-to-send we have not seen, each holding at least one
  // of the messages sent since group_first_; fewer than kCtsBuffers of them
  // leave a buffer free for the one we need. With the provider's in-order
  // matching that one always arrives first, and the 12-bit eager index sets
  // the bound.
  uint32_t eager_ahead_ = kRdmaEagerAhead;
  bool size_notices_ = false;
  // A send that got a NULL request holds its place: messages are numbered
  // in posting order, so no other tag may go first.
  bool blocked_ = false;
  int32_t blocked_tag_ = 0;
  bool closing_ = false;
  uint32_t next_index_ = 0;  // cumulative index of the next message
  uint32_t group_seq_ = 0;   // the oldest group not fully sent
  uint32_t group_first_ = 0;
  Group groups_[kRdmaSlots];
  static_assert(kPoolSize >= kRdmaEagerAhead);
  EagerSent eager_sent_[kRdmaEagerAhead];
  // Few: clear-to-sends that find none posted wait in the provider's
  // unexpected-message queue, and every posted receive costs the provider
  // a slot of its receive queue (shm has 1024 per endpoint).
  static constexpr int kCtsBuffers = kRdmaCtsBuffers;
  CtsBuffer cts_[kCtsBuffers];
  // Bumped by the polling thread after it changes a buffer's state; the
  // comm's thread walks the buffers only when it moved, or when its last
  // walk left one unsettled (service()).
  std::atomic<uint32_t> cts_events_{0};
  uint32_t cts_events_seen_ = 0;
  bool cts_unsettled_ = true;
  // Their bytes, cts_stride_ each: the largest clear-to-send on this
  // connection's rails (a ninth of kMaxRails' on one rail). Registered only
  // where the provider receives into them; where weft's message pool takes
  // every control message (each rdma endpoint today) they are copied to, and
  // neither they nor remote_targets_ are touched before use.
  size_t cts_stride_;
  std::unique_ptr<uint8_t[]> cts_bytes_;
  std::unique_ptr<uint64_t[]> remote_targets_;
  // Eager headers and size notices, a row per request, in two registered
  // blocks allocated on first use (under the provider's matching a
  // message's index and tag usually travel in its immediate instead): the
  // first for requests below kFirstHeaderRows and the abort notice, the
  // second for the rest, which only comms with that many sends in flight
  // at once ever take (the pool hands out its lowest free requests).
  static constexpr int kFirstHeaderRows = 32;
  static constexpr int kAbortRow = -1;
  static constexpr int kProbeRow = -2;
  struct HeaderBlock {
    std::unique_ptr<uint8_t[]> rows;
    void* region = nullptr;
  };
  HeaderBlock header_blocks_[2];
  static constexpr uint32_t kAbortSlot = 0xffff;
  OpContext abort_op_;
  bool abort_posted_ = false;
  std::atomic<bool> abort_done_{false};
  static constexpr uint32_t kProbeSlot = 0xfffe;
  static constexpr std::chrono::milliseconds kFirstProbeGap{1000};
  static constexpr std::chrono::milliseconds kMaxProbeGap{16000};
  static constexpr std::chrono::milliseconds kRefusedProbeGap{100};
  std::chrono::milliseconds probe_gap_ = kFirstProbeGap;  // doubles while a send waits
  // A failed probe's verdict waits kProbeFailGrace: when the peer process
  // died, its link fails the comm first, with the message that says so.
  static constexpr std::chrono::milliseconds kProbeFailGrace{1500};
  enum ProbeState : uint8_t { kNoProbe, kProbeRefused, kProbeInFlight, kProbeDone, kProbeFailed };
  std::string probe_failure_;  // why, once kProbeFailed
  OpContext probe_op_;
  std::chrono::milliseconds probe_deadline_;
  uint32_t wait_calls_ = 0;  // the clock is read every 64th
  // Epoch: not waiting; no probe under way. waiting_since_ moves on to the
  // last probe's completion or refusal.
  std::chrono::steady_clock::time_point waiting_since_{};
  std::chrono::steady_clock::time_point probe_since_{};
  std::chrono::steady_clock::time_point probe_failed_at_{};
  std::atomic<uint8_t> probe_state_{kNoProbe};
  void* cts_region_ = nullptr;
  ConnectionFault fault_;
  // Four at a time: a request holds a context per segment (1.8 KiB), and
  // most comms have only a few sends in flight.
  RequestPool<SendRequest, kPoolSize, 4> pool_;
};

}  // namespace weft::ofi
