// One RDM endpoint per device and process, shared by every comm of that
// device: on its domain (domain.h: fabric, domain, registration, GPU
// memory, the I/O lock), the address vector, completion queue, endpoint,
// the dispatch of completions, the message pool. Comms hold it through
// shared_ptr; it closes when the last comm (and the transport) let go of
// it, and its domain after it.
#pragma once

#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "nccl/types.h"
#include "ofi/endpoint/comm_close.h"
#include "ofi/endpoint/completion.h"
#include "ofi/endpoint/connect_inbox.h"
#include "ofi/endpoint/control_send_copies.h"
#include "ofi/endpoint/domain.h"
#include "ofi/endpoint/message_matcher.h"
#include "ofi/endpoint/registration.h"
#include "ofi/endpoint/remote_write_target.h"
#include "ofi/fabric/fabric_ptr.h"
#include "ofi/test_aids/test_aids.h"
#include "weft/transport.h"

namespace weft::ofi {

struct EndpointOptions {
  DomainOptions domain;
  int cq_read_count = 16;
  int cq_size = 8192;
  // RDMA protocol: the info has FI_RMA with writes and remote CQ data.
  bool rdma = false;
  // Test aids (test_aids.h): all off in real use.
  TestAidSettings test_aids;
  size_t eager_size = 8192;
  int eager_buffers = 16;
  // Clear-to-sends in flight per endpoint where they cannot be injected.
  int control_sends = 256;
  uint64_t max_message = 1ull << 32;  // maxP2pBytes
  // RDMA protocol on a fabric without FI_TAGGED: weft matches the control
  // messages itself (message_matcher.h).
  bool weft_matching = false;
  // One-sided endpoint (rma_comm.h): regions take remote reads, writes and
  // atomics.
  bool one_sided = false;
  // The provider keeps writes and atomics to a peer in order (FI_ORDER_WAW):
  // their completions need not wait for delivery.
  bool one_sided_ordered = false;
};

// Its member definitions live in one file per idea: endpoint.cpp (open,
// close, ids, orphans), endpoint_operations.cpp (posting data operations),
// endpoint_completions.cpp (reading and dispatching completions),
// endpoint_registration.cpp (memory registration), endpoint_addresses.cpp
// (peer addresses).
class Endpoint final : public Poller, public OrphanKeeper {
 public:
  // Opens everything for `info` (one device). Logs and returns an error on
  // failure, naming the device and the call that failed.
  static ncclResult_t open(const fi_info* info, const std::string& device_name,
                           const EndpointOptions& options, std::shared_ptr<Endpoint>* out);
  ~Endpoint();
  Endpoint(const Endpoint&) = delete;
  Endpoint& operator=(const Endpoint&) = delete;

  // Ids for listeners and comms, unique on this endpoint, in 1..2^31-1
  // (2^30-1 when weft matches). A closing listener or comm gives its id
  // back once it cancelled its receives, so that weft's matching drops what
  // still arrives for it.
  uint32_t next_id();
  void release_id(uint32_t id);
  // Keeps a closed comm whose operations could not be finished or cancelled
  // in time: its memory must stay valid until the endpoint stops producing
  // completions.
  void adopt(std::unique_ptr<Comm> orphan) override;

  // Data operations, each under the domain's I/O lock (domain.h).
  ssize_t send(const void* buffer, size_t size, void* descriptor, fi_addr_t peer, uint64_t tag,
               OpContext* context);
  ssize_t inject(const void* buffer, size_t size, fi_addr_t peer, uint64_t tag);
  // The same with the caller's remote CQ data instead of the size (rdma
  // protocol: eager data carries its index and tag there).
  ssize_t send_data(const void* buffer, size_t size, void* descriptor, uint64_t data,
                    fi_addr_t peer, uint64_t tag, OpContext* context);
  ssize_t inject_data(const void* buffer, size_t size, uint64_t data, fi_addr_t peer, uint64_t tag);
  ssize_t receive(void* buffer, size_t size, void* descriptor, uint64_t tag, OpContext* context);
  void cancel(OpContext* context);
  // A tagged send of a header followed by the caller's data (two iovecs),
  // with remote CQ data.
  ssize_t send_with_header(const void* header, size_t header_size, void* header_descriptor,
                           const void* data, size_t size, void* data_descriptor, uint64_t cq_data,
                           fi_addr_t peer, uint64_t tag, OpContext* context);
  // RDMA protocol. A write carrying 4 bytes of immediate data to the peer.
  ssize_t write(const void* buffer, size_t size, void* descriptor, fi_addr_t peer,
                uint64_t remote_address, uint64_t key, uint32_t immediate, OpContext* context);
  // A write into this process's own registered memory, through the NIC
  // (eager data into GPU buffers).
  ssize_t write_self(const void* buffer, size_t size, void* descriptor, const void* target,
                     const Registration& registration, OpContext* context);
  // Reads a few bytes of `data` (inside `registration`) into host memory
  // through the NIC, to this endpoint itself: the flush NCCL wants after the
  // NIC wrote GPU memory.
  ssize_t flush_read(const void* data, const Registration& registration, OpContext* context);
  // One-sided operations (rma_comm.h). A write or atomic completes once it
  // is visible at the peer (delivery complete) unless the provider keeps
  // them in order; a read once its data landed here.
  ssize_t rma_write(const void* buffer, size_t size, void* descriptor, fi_addr_t peer,
                    uint64_t remote_address, uint64_t key, OpContext* context);
  ssize_t rma_read(void* buffer, size_t size, void* descriptor, fi_addr_t peer,
                   uint64_t remote_address, uint64_t key, OpContext* context);
  // Adds *operand (registered memory, kept until completion: some
  // providers complete injected atomics never) to the peer's 64-bit word.
  ssize_t atomic_add(const uint64_t* operand, void* descriptor, fi_addr_t peer,
                     uint64_t remote_address, uint64_t key, OpContext* context);
  // Whether the provider adds unsigned 64-bit words (fi_query_atomic); if
  // not, why.
  bool atomic_add_supported(std::string* why) const;
  // How a peer names `data` in a write: its virtual address, or its offset
  // in the registration when the provider does not use FI_MR_VIRT_ADDR.
  uint64_t remote_address(const void* data, const Registration& registration) const;

  // Reads a batch of completions and dispatches them. Returns an error when
  // the completion queue itself fails, and once an operation without a
  // context (an injected message) failed: weft cannot tell which
  // connection lost it, so every connection on this endpoint fails rather
  // than wait for it forever.
  ncclResult_t poll() override;
  // A slot for a receiver's immediates (1..65535, 0 when all are taken).
  uint16_t attach_write_target(RemoteWriteTarget* target);
  void detach_write_target(uint16_t index);
  // Offers messages for `tag` to `sink` as they arrive in the message pool
  // (message_matcher.h). False without a pool: the provider matches them
  // into posted receives itself.
  bool attach_eager_sink(uint64_t tag, EagerSink* sink);
  void detach_eager_sink(uint64_t tag);

  // Registers [start, start + length) on the domain with the access this
  // endpoint's protocol needs, bound to it where the provider wants that.
  // On failure returns the provider's negative error and the call that
  // failed.
  int register_region(void* start, size_t length, const MemorySource& source, const void* data,
                      Registration* out, const char** failed_call);
  // Registration, GPU memory and the I/O lock live on the domain.
  Domain& domain() { return domain_; }
  const Domain& domain() const { return domain_; }

  // Address vector entry for a peer's raw address; cached so reconnecting to
  // the same peer does not grow the AV.
  ncclResult_t insert_address(const uint8_t* address, size_t size, fi_addr_t* out);
  std::string address_to_string(const uint8_t* address, size_t size) const;
  // Cheap sanity check of a peer's address before the provider sees it.
  bool plausible_peer_address(const uint8_t* address, size_t size, std::string* problem) const;
  const uint8_t* local_address() const { return local_address_; }
  size_t local_address_size() const { return local_address_size_; }

  // What was found or chosen when the endpoint opened.
  const std::string& device_name() const { return device_name_; }
  const std::string& provider_name() const { return provider_name_; }
  bool rdma() const { return rdma_; }
  // Control messages are plain messages matched by weft, not the provider.
  bool weft_matching() const { return weft_matching_; }
  // Control messages land in weft's message pool and are copied to the
  // buffer their receive names (which needs no registration).
  bool receives_pooled() const { return pooled_; }
  // Whether the target's completion of a write reports its length (libfabric
  // 1.17's tcp;ofi_rxm reports 0): otherwise senders add a size notice.
  bool write_lengths_reported() const { return write_lengths_reported_; }
  size_t eager_size() const { return eager_size_; }
  int eager_buffers() const { return eager_buffers_; }
  uint64_t max_message() const { return max_message_; }
  size_t max_write_size() const { return max_write_size_; }
  size_t iov_limit() const { return iov_limit_; }
  // Whether `size` bytes may go as an inject (no completion): only where the
  // provider is done with it on return (injects_done_on_return).
  bool may_inject(size_t size) const { return injects_ && size <= inject_size_; }
  // Where every listener's connect requests arrive (not on one-sided
  // endpoints).
  ConnectInbox& connect_inbox() { return *connect_inbox_; }
  // Registered copies for control messages that cannot be injected (rdma
  // protocol only).
  ControlSendCopies& control_copies() { return *control_copies_; }
  // Null unless a test turned an aid on (test_aids.h).
  const TestAids* test_aids() const { return test_aids_.get(); }
  // After a truncated or failed connection some providers cannot use the
  // connection again (tcp loses its place in the byte stream): new comms on
  // this device then get a fresh endpoint, and so a fresh connection.
  void mark_broken() { broken_.store(true, std::memory_order_relaxed); }
  // A comm closed while its peer may still send to it (completes_before_
  // delivery): the endpoint then stays open a moment longer when it
  // closes, so that those messages arrive rather than meet a reset, once
  // per endpoint rather than once per comm.
  void expect_late_messages() { late_messages_.store(true, std::memory_order_relaxed); }
  bool broken() const { return broken_.load(std::memory_order_relaxed); }

 private:
  // The most completions one read takes.
  static constexpr int kMaxBatch = 256;

  Endpoint() = default;
  // Logs that `call` failed on this device.
  [[gnu::cold]] ncclResult_t fail(const char* call, int rc) const;
  ncclResult_t settle_efa_settings();
  ncclResult_t open_flush_target();
  // Writes a few bytes to itself; false when the write or its completions fail.
  bool probe_writes(std::string* problem);
  // Delivers `count` fresh entries, or through the reordering window.
  void deliver(fi_cq_tagged_entry* entries, ssize_t count);
  void dispatch(const fi_cq_tagged_entry& entry);
  // The provider's inject, the I/O lock held; `data` already compact under
  // weft's matching.
  ssize_t inject_now(const void* buffer, size_t size, uint64_t data, fi_addr_t peer, uint64_t tag);
  // Passes a posting call's result on, counting what was posted for the
  // held-injects test aid.
  ssize_t tracked(ssize_t rc) {
    if (test_aids_) [[unlikely]] {
      if (rc == 0) test_aids_->held_injects.tracked_posted();
    }
    return rc;
  }
  // Reads up to `count` entries in the queue's format (tagged, or data
  // entries widened to tagged ones when weft matches).
  ssize_t read_queue(fi_cq_tagged_entry* entries, size_t count);

  // The RDMA protocol's pool of receive buffers (message_matcher.h) that
  // every control message and, where the provider consumes a receive per
  // write (FI_RX_CQ_DATA), every remote write lands in. The I/O lock is held.
  // Eager size and pool buffers for messages up to max_send.
  void fit_message_pool(size_t max_send);
  ncclResult_t open_message_pool();
  void post_pool_slot(int slot);
  // An emptied slot: posted again by poll() once the completion queue is
  // idle (not on the path of the message that emptied it), or at once when
  // a quarter of the pool waits.
  void return_pool_slot(int slot) { unposted_.push_back(slot); }
  void repost_pool_slots();
  bool is_pool_op(const void* op_context) const;
  void receive_message(const fi_cq_tagged_entry& entry, int slot);
  void pool_error(const fi_cq_err_entry& error, int slot);
  void deliver_matched();

  // First: opened first, closed last.
  Domain domain_;
  FabricPtr<fid_av> av_;
  FabricPtr<fid_cq> cq_;
  FabricPtr<fid_ep> ep_;
  bool rma_ = false;
  bool rdma_ = false;
  bool one_sided_ = false;
  uint64_t one_sided_flags_ = FI_COMPLETION | FI_DELIVERY_COMPLETE;
  bool write_lengths_reported_ = true;
  size_t eager_size_ = 0;
  int eager_buffers_ = 16;
  uint64_t max_message_ = 0;
  size_t max_write_size_ = 0;
  size_t iov_limit_ = 1;
  std::vector<RemoteWriteTarget*> write_targets_;  // by immediate target index
  std::vector<uint16_t> free_write_targets_;
  bool weft_matching_ = false;
  // Control messages land in the pool and weft matches them (every RDMA
  // protocol endpoint; weft_matching_ says how they travel).
  bool pooled_ = false;
  bool enabled_ = false;
  static constexpr int kPoolSlots = 512;
  static constexpr size_t kMinPoolSlot = 4096;  // every control message fits
  static constexpr size_t kEagerMargin = 64;    // an eager message's header fits
  size_t pool_slot_size_ = 0;
  std::unique_ptr<uint8_t[]> pool_;
  fid_mr* pool_mr_ = nullptr;
  void* pool_descriptor_ = nullptr;
  std::unique_ptr<OpContext[]> pool_ops_;
  std::vector<int> unposted_;  // pool slots to post again (return_pool_slot, or EAGAIN)
  std::unique_ptr<MessageMatcher> matcher_;
  std::unique_ptr<ControlSendCopies> control_copies_;
  std::unique_ptr<ConnectInbox> connect_inbox_;
  // Target of flush reads, registered once; fi_addr of this endpoint.
  uint64_t flush_buffer_[8] = {};
  fid_mr* flush_mr_ = nullptr;
  void* flush_descriptor_ = nullptr;
  fi_addr_t self_ = FI_ADDR_UNSPEC;
  std::string device_name_;
  std::string provider_name_;
  size_t inject_size_ = 0;
  bool injects_ = false;
  std::unique_ptr<TestAids> test_aids_;  // null in real use
  uint32_t address_format_ = FI_FORMAT_UNSPEC;
  int cq_read_count_ = 16;
  uint8_t local_address_[128] = {};
  size_t local_address_size_ = 0;
  std::atomic<uint32_t> next_id_{1};
  std::atomic<bool> cq_failed_{false};
  std::atomic<bool> broken_{false};
  std::atomic<bool> late_messages_{false};
  uint64_t batches_read_ = 0;  // completion batches read (the I/O lock)
  std::atomic<bool> lost_injected_{false};

  std::mutex mutex_;  // guards the address cache and the orphans
  std::unordered_map<std::string, fi_addr_t> address_cache_;
  std::vector<std::unique_ptr<Comm>> orphans_;
};

}  // namespace weft::ofi
