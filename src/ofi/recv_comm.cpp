#include "ofi/recv_comm.h"

#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>

#include "ofi/tag_layout.h"
#include "weft/log.h"

namespace weft::ofi {

OfiRecvComm::OfiRecvComm(CommSetup setup, uint32_t local_id, uint32_t connector_id)
    : CommBase<RecvComm>(std::move(setup)), local_id_(local_id), connector_id_(connector_id) {
  ack_op_.target = this;
  ack_op_.slot = 0;
}

ncclResult_t OfiRecvComm::post_ack(bool* posted) {
  *posted = false;
  if (!ack_posted_) {
    if (control_descriptor() == nullptr && endpoint().needs_local_mr()) {
      ncclResult_t result = register_control(ack_buffer_, sizeof(ack_buffer_));
      if (result != ncclSuccess) return result;
    }
    ConnectAck ack;
    ack.recv_comm_id = local_id_;
    encode_connect_ack(ack, ack_buffer_);
    ssize_t rc = endpoint().send(ack_buffer_, sizeof(ack_buffer_), control_descriptor(), peer(),
                                 ack_tag(connector_id_), &ack_op_);
    if (rc == -FI_EAGAIN) return endpoint().poll();
    if (rc != 0) {
      WEFT_WARN("%s: accept from %s: sending the acknowledgement failed: %s", device_name().c_str(),
                peer_name().c_str(), fi_strerror((int)-rc));
      return ncclSystemError;
    }
    ack_posted_ = true;
  }
  *posted = true;
  return ncclSuccess;
}

ncclResult_t OfiRecvComm::irecv(int n, void** data, const size_t* sizes, const int* tags,
                                void** mhandles, Request** request) {
  *request = nullptr;
  if (n < 1 || n > kMaxRecvs) {
    WEFT_WARN("%s: irecv of %d buffers in one group, supported 1..%d", device_name().c_str(), n,
              kMaxRecvs);
    return ncclInvalidArgument;
  }
  if (data == nullptr || tags == nullptr) {
    WEFT_WARN("%s: irecv with NULL data or tags", device_name().c_str());
    return ncclInvalidArgument;
  }
  if (partial_.request != nullptr) {
    // Keep posting order: finish the earlier group first.
    ncclResult_t result = post_pending();
    if (result != ncclSuccess || partial_.request != nullptr) return result;
  }
  RecvRequest* req = pool_.acquire();
  if (req == nullptr) return progress();
  req->start(this, n, /*is_send=*/false);
  partial_.request = req;
  partial_.next = 0;
  for (int i = 0; i < n; ++i) {
    partial_.data[i] = data[i];
    partial_.descriptors[i] = descriptor_of(mhandles == nullptr ? nullptr : mhandles[i]);
    partial_.tags[i] = data_tag(local_id_, tags[i]);
    req->set_posted_size(i, sizes == nullptr ? 0 : sizes[i]);
  }
  ncclResult_t result = post_pending();
  if (result != ncclSuccess) return result;
  if (partial_.request == req && partial_.next == 0) {
    // The provider took nothing: hand the slot back and let NCCL retry.
    partial_.request = nullptr;
    pool_.release(req);
    return ncclSuccess;
  }
  *request = req;
  return ncclSuccess;
}

ncclResult_t OfiRecvComm::post_pending() {
  RecvRequest* req = partial_.request;
  while (partial_.next < req->count()) {
    int slot = partial_.next;
    ssize_t rc = endpoint().receive(partial_.data[slot], req->posted_size(slot),
                                    partial_.descriptors[slot], partial_.tags[slot], req->op(slot));
    if (rc == -FI_EAGAIN) return endpoint().poll();
    if (rc != 0) {
      WEFT_WARN("%s: irecv of %zu bytes from %s failed: %s", device_name().c_str(),
                req->posted_size(slot), peer_name().c_str(), fi_strerror((int)-rc));
      if (slot > 0) req->drop_unposted(req->count() - slot);
      partial_.request = nullptr;
      if (slot == 0) pool_.release(req);
      return ncclSystemError;
    }
    ++partial_.next;
  }
  partial_.request = nullptr;
  return ncclSuccess;
}

ncclResult_t OfiRecvComm::iflush(int, void**, const int*, void**, Request** request) {
  // Host memory only: received data is already visible to the CPU.
  *request = nullptr;
  return ncclSuccess;
}

ncclResult_t OfiRecvComm::progress() {
  if (partial_.request != nullptr) {
    ncclResult_t result = post_pending();
    if (result != ncclSuccess) return result;
  }
  return endpoint().poll();
}

void OfiRecvComm::recycle(Request* request) {
  pool_.release(static_cast<RecvRequest*>(request));
}

ncclResult_t OfiRecvComm::report_failure(int error, size_t overflow_length, size_t posted_size,
                                         const char* text) {
  return completion_failure("receive", endpoint(), peer_name(), error, overflow_length, posted_size,
                            text);
}

void OfiRecvComm::on_complete(uint32_t, size_t, const uint64_t*) {
  ack_done_.store(true, std::memory_order_release);
}

void OfiRecvComm::on_error(uint32_t, int error, size_t, const char* text) {
  WEFT_WARN("%s: acknowledgement to %s failed: %s (%s)", device_name().c_str(), peer_name().c_str(),
            fi_strerror(error), text);
  ack_done_.store(true, std::memory_order_release);
}

bool OfiRecvComm::in_flight() {
  if (ack_posted_ && !ack_done_.load(std::memory_order_acquire)) return true;
  for (size_t i = 0; i < kMaxRequests; ++i) {
    RecvRequest* req = pool_.at(i);
    if (pool_.is_used(req) && !req->finished()) return true;
  }
  return false;
}

void OfiRecvComm::cancel_receives() {
  if (partial_.request != nullptr) {
    partial_.request->drop_unposted(partial_.request->count() - partial_.next);
    partial_.request = nullptr;
  }
  for (size_t i = 0; i < kMaxRequests; ++i) {
    RecvRequest* req = pool_.at(i);
    if (!pool_.is_used(req) || req->finished()) continue;
    for (int slot = 0; slot < req->count(); ++slot) {
      endpoint().cancel(req->op(slot));
    }
  }
}

}  // namespace weft::ofi
