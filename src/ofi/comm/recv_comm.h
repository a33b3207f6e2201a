// Receiving side of a connection. Created by accept() once a connect
// request arrived; the acknowledgement it sends tells the sender which
// comm id to put in its tags. Receives go through the data path of the
// protocol both sides speak; flushes are the comm's own.
#pragma once

#include <atomic>
#include <memory>

#include "core/request_pool.h"
#include "ofi/comm/chosen_path.h"
#include "ofi/comm/data_comm.h"
#include "ofi/rdma/rdma_recv_path.h"
#include "ofi/tagged/tagged_recv_path.h"
#include "ofi/wire/connection_messages.h"

namespace weft::ofi {

class OfiRecvComm final : public OfiDataComm<RecvComm>, public CompletionTarget {
 public:
  // `connector`: the connecting process, whose liveness link the comm
  // watches (a hello this side sends presents `connector_link_key`).
  OfiRecvComm(CommSetup setup, uint32_t local_id, uint32_t connector_id,
              const PeerIdentity& connector, uint64_t connector_link_key);

  // Posts the acknowledgement; *posted once the provider took it.
  ncclResult_t post_ack(bool* posted);
  // After post_ack: progresses the endpoint; true once the acknowledgement
  // completed. `result` gets an error when it failed.
  bool ack_delivered(ncclResult_t* result);

  ncclResult_t irecv(int n, void** data, const size_t* sizes, const int* tags, void** mhandles,
                     Request** request) override;
  ncclResult_t iflush(int n, void** data, const int* sizes, void** mhandles,
                      Request** request) override;

  // Drives the data path (and with it the completion queue).
  ncclResult_t progress();
  void on_complete(uint32_t slot, size_t length, const uint64_t* remote_data) override;
  void on_error(uint32_t slot, int error, size_t overflow_length, const char* text) override;

 protected:
  bool in_flight() override;
  uint32_t local_id() const override { return local_id_; }
  void cancel_receives() override;

 private:
  // A flush read per rail; NCCL flushes at most once per receive.
  struct FlushOwner;
  using FlushRequest = OfiRequest<kMaxRails, FlushOwner>;

  uint32_t local_id_;
  uint32_t connector_id_;
  bool ack_posted_ = false;
  std::atomic<bool> ack_done_{false};
  std::atomic<bool> ack_failed_{false};
  OpContext ack_op_;
  // Registered together; `empty` takes the tagged path's 0-byte receives.
  struct ControlBuffers {
    uint8_t ack[kConnectAckSize];
    uint8_t empty[8];
  } control_{};
  RequestPool<FlushRequest, kMaxRequests> flush_pool_;
  // Flush requests go back to their own pool.
  struct FlushOwner final : CompletionOwner {
    explicit FlushOwner(OfiRecvComm* owner) : comm(owner) {}
    ncclResult_t progress() override;
    void recycle(Request* request) override;
    ncclResult_t report_failure(int error, size_t overflow_length, size_t posted_size,
                                const char* text) override;
    OfiRecvComm* comm;
  } flush_owner_{this};
  ChosenPath<TaggedRecvPath, RdmaRecvPath> path_;
};

}  // namespace weft::ofi
