// One-sided comms over verbs (weft/one_sided.h). A comm of N ranks holds
// one RC queue pair to every rank, this one included (NCCL's graph flush
// puts to itself), on one completion queue, apart from the net comms' queue
// pairs: puts are RDMA writes, gets RDMA reads, and signals remote
// fetch-and-adds where the device has atomics, else 32-byte sends that the
// target's progress adds in (host memory only). Ranks meet on first use
// (rma_peer_links.h): the queue pair to a rank, and the TCP connection its
// windows are asked for on, exist only once an operation addressed it.
// Symmetric registration and the context blocks are core's
// (SymmetricComm, RmaBlock).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/rma_block.h"
#include "core/symmetric_comm.h"
#include "core/tcp_channel.h"
#include "verbs/open_port.h"
#include "verbs/queue_pairs.h"
#include "verbs/rma_peer_links.h"

namespace weft::verbs {

// A work request's wr_id points at one of these.
struct RmaOp {
  CompletionTarget* target = nullptr;
  uint32_t slot = 0;
};

class VerbsRmaListenComm final : public RmaListenComm {
 public:
  std::shared_ptr<OpenPort> port;
  std::unique_ptr<TcpListener> listener;
  uint32_t id = 0;
  uint64_t secret = 0;       // its handle's (core/listen_secret.h)
  uint32_t fingerprint = 0;  // link layer (VerbsTransport::fingerprint)
  QpSettings settings;
  bool message_signals = false;  // the device has no atomics (or a test asks)
};

class VerbsRmaComm final : public SymmetricComm, public RmaWire<RmaOp>, private CompletionTarget {
 public:
  // Checks every rank's handle and takes over the listener; meets no rank
  // (this one's own queue pair excepted). An ask for a window unanswered
  // within `timeout_ms` fails the operations waiting for it, naming the rank.
  static ncclResult_t connect(void* const* handles, int nranks, int rank,
                              VerbsRmaListenComm* listen, int timeout_ms,
                              std::unique_ptr<VerbsRmaComm>* out);
  ~VerbsRmaComm() override;

  ncclResult_t progress() override;
  const std::string& device_name() const override { return port_->name(); }

  // RmaWire: the blocks' operations.
  size_t max_operation_bytes() const override { return port_->max_message_size(); }
  Posted write(uint32_t rank, uint8_t* local, size_t length, void* descriptor, uint64_t remote,
               uint64_t key, RmaOp* op, std::string* error) override;
  Posted read(uint32_t rank, uint8_t* local, size_t length, void* descriptor, uint64_t remote,
              uint64_t key, RmaOp* op, std::string* error) override;
  Posted signal(uint32_t rank, uint64_t* operand, void* operand_descriptor, uint64_t remote,
                uint64_t key, RmaOp* op, std::string* error) override;
  bool signals_by_message() const override { return message_signals_; }
  ncclResult_t register_operands(void* data, size_t size, void** region,
                                 void** descriptor) override;
  void deregister_operands(void* region) override;

 protected:
  ncclResult_t register_local(void* data, size_t size, int type, int dmabuf_fd,
                              uint64_t dmabuf_offset, void** local, void** descriptor,
                              uint64_t* address, uint64_t* key) override;
  ncclResult_t deregister_local(void* local) override;
  std::unique_ptr<RmaBlockBase> make_block(const RmaContextConfig& config,
                                           ncclResult_t* result) override;
  void send_on_demand(uint32_t rank, const RmaRecord& record) override;

 private:
  friend class RmaPeerLinks;
  // Receives posted per rank for signal messages.
  static constexpr int kSignalSlots = 64;

  VerbsRmaComm(std::shared_ptr<OpenPort> port, int rank, int nranks, int timeout_ms,
               bool message_signals);
  // What connect() sets up before NCCL has the comm.
  ncclResult_t open(VerbsRmaListenComm& listen, std::vector<SocketAddress> addresses);
  // For RmaPeerLinks: the queue pair to `rank` in INIT (with its signal
  // receives), its address for `rank`, and up against `rank`'s address.
  bool open_queue_pair(uint32_t rank, std::string* error);
  void encode_queue_pair(uint32_t rank, uint8_t* out) const;
  bool connect_queue_pair(uint32_t rank, const uint8_t* info, std::string* error);
  ncclResult_t post_signal_receive(uint32_t slot);
  Posted post(uint32_t rank, ibv_send_wr& wr, const char* call, std::string* error);
  Posted post_rdma(uint32_t rank, ibv_wr_opcode opcode, uint8_t* local, size_t length,
                   void* descriptor, uint64_t remote, uint64_t key, RmaOp* op, const char* call,
                   std::string* error);
  // Signal messages arriving (CompletionTarget of the receive slots).
  void on_complete(uint32_t slot, size_t length, const uint64_t* remote_data) override;
  void on_error(uint32_t slot, int error, size_t overflow_length, const char* text) override;

  std::shared_ptr<OpenPort> port_;
  bool message_signals_;
  QueuePairs qps_;          // qp(r): to rank r, once met
  uint32_t listen_id_ = 0;  // this rank's (its handle's)
  QpSettings settings_;
  std::vector<uint32_t> listen_ids_;  // by rank: its listen comm's id (the handle's)
  std::unique_ptr<RmaPeerLinks> links_;
  // Signal messages: kSignalSlots receive buffers per rank, registered.
  std::unique_ptr<uint8_t[]> inbox_;
  MemoryHandle* inbox_region_ = nullptr;
  std::unique_ptr<RmaOp[]> inbox_ops_;
  std::atomic<bool> receive_failed_{false};
};

}  // namespace weft::verbs
