// Sending side of a connection. Created by connect(); becomes usable once
// the listener's acknowledgement (carrying the receiver's comm id) arrived,
// and then sends through the data path of the protocol both sides speak.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>

#include "ofi/comm/chosen_path.h"
#include "ofi/comm/data_comm.h"
#include "ofi/rdma/rdma_send_path.h"
#include "ofi/tagged/tagged_send_path.h"
#include "ofi/wire/connection_messages.h"

namespace weft::ofi {

class OfiSendComm final : public OfiDataComm<SendComm>, public CompletionTarget {
 public:
  // `listen_id`, `listen_secret` and `listener` (its process; token 0:
  // not named): the listener's, from its handle.
  OfiSendComm(CommSetup setup, uint32_t local_id, uint32_t listen_id, uint64_t listen_secret,
              const PeerIdentity& listener, int connect_timeout_ms);

  // Non-blocking connection setup; *connected once the peer acknowledged.
  ncclResult_t step_connect(bool* connected);

  ncclResult_t isend(void* data, size_t size, int tag, void* mhandle, Request** request) override;

  void on_complete(uint32_t slot, size_t length, const uint64_t* remote_data) override;
  void on_error(uint32_t slot, int error, size_t overflow_length, const char* text) override;

 protected:
  bool in_flight() override;
  uint32_t local_id() const override { return local_id_; }
  void cancel_receives() override;
  void before_close(int timeout_ms) override;

 private:
  enum ControlSlot : uint32_t { kConnectSlot = 0, kAckSlot = 1 };

  struct ControlBuffers {
    uint8_t connect[kConnectRequestSize];
    uint8_t ack[kConnectAckSize];
  };

  uint32_t local_id_;
  uint32_t listen_id_;
  uint64_t listen_secret_;
  std::chrono::steady_clock::time_point connect_deadline_;
  ListenerWatch listener_watch_;  // until the acknowledgement
  uint32_t remote_id_ = 0;
  bool connected_ = false;
  bool registered_ = false;
  bool ack_posted_ = false;
  bool connect_posted_ = false;
  std::atomic<bool> connect_done_{false};
  std::atomic<bool> ack_done_{false};
  std::atomic<int> control_error_{0};
  size_t ack_length_ = 0;
  char control_error_text_[160] = {};
  OpContext control_ops_[2];
  ControlBuffers control_{};
  ChosenPath<TaggedSendPath, RdmaSendPath> path_;
};

}  // namespace weft::ofi
