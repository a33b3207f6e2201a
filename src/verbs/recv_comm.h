// The receiving side of a verbs connection. irecv posts a receive work
// request on each queue pair the message will arrive on and RDMA-writes a
// clear-to-send group (buffer address, key, size, tag per receive) into the
// sender's FIFO; the sender's write with immediate completes it. iflush of
// GPU memory reads one byte back through a loopback queue pair, so that the
// data the NIC wrote is visible to the GPU before NCCL uses it.
#pragma once

#include <array>

#include "core/flush_method.h"
#include "verbs/data_comm.h"
#include "verbs/setup_exchange.h"

namespace weft::verbs {

struct RecvOptions {
  QpSettings qp_settings;
  FlushMethod flush = FlushMethod::Read;
  int peer_timeout_ms = 0;           // side channel keepalive (WEFT_PEER_TIMEOUT_MS)
  std::shared_ptr<PeerLinks> links;  // liveness links; null: none
};

class VerbsRecvComm final : public VerbsDataComm<RecvComm> {
 public:
  VerbsRecvComm(ConnectionSetup setup, const RecvOptions& options, uint32_t listen_id);
  ~VerbsRecvComm() override;

  // Starts the exchange for an accepted side channel whose sender's info
  // (kConnectionInfoSize bytes) has arrived: the queue pairs are made from
  // it.
  bool prepare(const uint8_t* sender_info, std::string* error);
  SetupProgress advance_setup(std::string* error);

  ncclResult_t irecv(int n, void** data, const size_t* sizes, const int* tags, void** mhandles,
                     Request** request) override;
  ncclResult_t iflush(int n, void** data, const int* sizes, void** mhandles,
                      Request** request) override;

 private:
  struct Control {
    uint64_t sizes[kFifoSlots][kMaxRecvs];  // the sender writes these for groups
    FifoEntry cts[kFifoSlots][kMaxRecvs];   // staged clear-to-send groups
    uint8_t flush_target[64];
  };
  struct Slot {
    VerbsRequest* request = nullptr;
    uint32_t sequence = 0;
    bool sizes_in_fifo = false;
  };

  bool connect(const ConnectionInfo& remote, ConnectionInfo* local, std::string* error);
  bool make_flush_pair(std::string* error);
  void on_completion(const ibv_wc& wc) override;
  void on_data(const ibv_wc& wc);
  bool has_pending() const override { return requests_in_flight() > 0; }
  ncclResult_t progress() override;
  void release_slot(VerbsRequest* request) override;

  RecvOptions options_;
  uint32_t listen_id_;
  Control* control_ = nullptr;
  MemoryHandle* control_region_ = nullptr;
  ConnectionInfo remote_;
  bool split_data_ = false;
  uint32_t sequence_ = 0;
  std::array<Slot, kFifoSlots> slots_;
  SetupExchange exchange_;
  QueuePairs flush_qps_;  // two queue pairs connected to each other
  std::array<VerbsRequest*, kMaxRequests> flushes_ = {};
  int flushes_pending_ = 0;
};

}  // namespace weft::verbs
