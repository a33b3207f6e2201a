// The sending side of a verbs connection. The receiver RDMA-writes a
// clear-to-send group into this comm's FIFO for every receive it posts;
// isend matches its tag there and, once every send of the group is in,
// RDMA-writes the data straight into the receive buffers, the last write of
// each queue pair carrying the immediate that completes the receive.
#pragma once

#include <array>
#include <chrono>

#include "verbs/cts_grace.h"
#include "verbs/data_comm.h"
#include "verbs/setup_exchange.h"

namespace weft::verbs {

struct SendOptions {
  int qp_count = 1;
  bool split_data = false;
  bool adaptive_routing = false;
  size_t ar_threshold = 8192;
  bool use_inline = false;
  QpSettings qp_settings;
};

class VerbsSendComm final : public VerbsDataComm<SendComm> {
 public:
  // `listen_id` and `listen_secret`: the listener's, from its handle.
  VerbsSendComm(ConnectionSetup setup, const SendOptions& options, uint32_t listen_id,
                uint64_t listen_secret);
  ~VerbsSendComm() override;

  // Registers the FIFO and creates nothing else; false with the reason.
  bool prepare(std::string* error);
  // Drives the side-channel exchange: Done once the queue pairs are
  // connected and the receiver knows it.
  SetupProgress advance_setup(std::string* error);

  // connect() gives up after this (WEFT_CONNECT_TIMEOUT_MS).
  std::chrono::steady_clock::time_point connect_deadline;

  ncclResult_t isend(void* data, size_t size, int tag, void* mhandle, Request** request) override;

 private:
  struct Control {
    FifoEntry fifo[kFifoSlots][kMaxRecvs];
    uint64_t sizes[kFifoSlots][kMaxRecvs];  // staged for the sizes write
  };
  // 24 bytes: 32 FIFO slots of 8 are a send comm's largest part.
  struct Item {
    const uint8_t* data = nullptr;
    VerbsRequest* request = nullptr;
    uint32_t lkey = 0;
    bool truncated = false;
    size_t size() const { return request->posted[0]; }
  };
  struct Slot {
    int count = 0;  // 0: the group has not been read from the FIFO yet
    int taken = 0;
    uint32_t taken_mask = 0;
    int pending = 0;  // queue pairs whose last write has not completed
    Item items[kMaxRecvs];
  };

  ncclResult_t post_group(int slot_index);
  void on_completion(const ibv_wc& wc) override;
  bool has_pending() const override { return requests_in_flight() > 0; }
  ncclResult_t progress() override { return poll_cq(qps().cq()); }
  ConnectionInfo local_info() const;

  SendOptions options_;
  uint32_t listen_id_;
  uint64_t listen_secret_;
  Control* control_ = nullptr;
  MemoryHandle* control_region_ = nullptr;
  uint32_t sequence_ = 0;
  InvalidCtsGrace invalid_cts_;
  std::array<Slot, kFifoSlots> slots_;
  ConnectionInfo remote_;
  SetupExchange exchange_;
  // Work requests of one queue pair's share of a group: data writes, the
  // sizes write and the write with immediate.
  ibv_send_wr wrs_[kMaxRecvs + 2] = {};
  ibv_sge sges_[kMaxRecvs + 2] = {};
};

}  // namespace weft::verbs
