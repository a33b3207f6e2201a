#include "ofi/comm/recv_comm.h"

#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>

#include <cstring>

#include "core/cuda/cuda_driver.h"
#include "ofi/endpoint/tag_layout.h"
#include "weft/log.h"

namespace weft::ofi {

OfiRecvComm::OfiRecvComm(CommSetup setup, uint32_t local_id, uint32_t connector_id,
                         const PeerIdentity& connector, uint64_t connector_link_key)
    : OfiDataComm<RecvComm>(std::move(setup)), local_id_(local_id), connector_id_(connector_id) {
  ack_op_.target = this;
  ack_op_.slot = 0;
  watch_peer(connector, connector_link_key);
}

ncclResult_t OfiRecvComm::post_ack(bool* posted) {
  *posted = false;
  if (!ack_posted_) {
    if (!control_registered()) {
      ncclResult_t result = register_control(&control_, sizeof(control_));
      if (result != ncclSuccess) return result;
    }
    ConnectAck ack;
    ack.recv_comm_id = local_id_;
    ack.process = own_identity();
    ack.link_key = own_link_key();
    if (!path_.chosen()) {
      PathPeer path_peer{peer(), peer_name(), connector_id_, local_id_, watch()};
      if (endpoint().rdma()) {
        // Bounce buffers are posted before the sender learns it may use them.
        std::vector<Endpoint*> rails;
        for (int r = 0; r < rail_count(); ++r) rails.push_back(&rail_endpoint(r));
        RdmaRecvPath& rdma =
            path_.choose<RdmaRecvPath>(std::move(rails), std::move(path_peer),
                                       endpoint().eager_size(), endpoint().eager_buffers());
        ncclResult_t result = rdma.start();
        if (result != ncclSuccess) return result;
      } else {
        path_.choose<TaggedRecvPath>(endpoint(), std::move(path_peer), control_.empty,
                                     control_descriptor());
      }
    }
    if (RdmaRecvPath* rdma = path_.get<RdmaRecvPath>()) {
      ack.protocol = Protocol::Rdma;
      ack.eager_size = rdma->eager_size();
      ack.needs_size_notices = rdma->needs_size_notices();
      ack.rails = static_cast<uint8_t>(rail_count());
      for (int r = 0; r < rail_count(); ++r) {
        ack.write_target[r] = rdma->write_target(r);
        if (r == 0) continue;
        ack.address_size[r] = static_cast<uint8_t>(rail_endpoint(r).local_address_size());
        std::memcpy(ack.address[r], rail_endpoint(r).local_address(), ack.address_size[r]);
      }
    }
    encode_connect_ack(ack, control_.ack);
    ssize_t rc = endpoint().send(control_.ack, sizeof(control_.ack), control_descriptor(), peer(),
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
  return path_.apply(
      [&](auto& path) { return path.irecv(n, data, sizes, tags, mhandles, request); });
}

ncclResult_t OfiRecvComm::iflush(int n, void** data, const int* sizes, void** mhandles,
                                 Request** request) {
  // A NULL request tells NCCL there is nothing (left) to wait for.
  *request = nullptr;
  FlushMethod method = endpoint().domain().flush_method();
  if (method == FlushMethod::None || data == nullptr || mhandles == nullptr) return ncclSuccess;
  if (n < 1 || n > kMaxRecvs) {
    WEFT_WARN("%s: iflush of %d buffers in one group, supported 1..%d", device_name().c_str(), n,
              kMaxRecvs);
    return ncclInvalidArgument;
  }
  // The NIC's writes to GPU memory land in order: reading back the last
  // buffer that received data makes all of them visible. Host memory and
  // empty receives need nothing.
  const MemoryRegion* target = nullptr;
  void* target_data = nullptr;
  for (int i = 0; i < n; ++i) {
    auto* region = static_cast<const MemoryRegion*>(mhandles[i]);
    if (region == nullptr || (sizes != nullptr && sizes[i] <= 0)) continue;
    if (region->magic != MemoryRegion::kMagic) {
      WEFT_WARN("%s: iflush with an invalid memory handle %p", device_name().c_str(), mhandles[i]);
      return ncclInvalidArgument;
    }
    if (region->type != NCCL_PTR_CUDA || region->size == 0) continue;
    target = region;
    target_data = data[i];
  }
  if (target == nullptr) return ncclSuccess;

  if (method == FlushMethod::Cuda) {
    std::string error;
    if (!endpoint().domain().cuda()->flush_rdma_writes(&error)) {
      WEFT_WARN("%s: flushing GPUDirect RDMA writes failed: %s", device_name().c_str(),
                error.c_str());
      return ncclUnhandledCudaError;
    }
    return ncclSuccess;
  }

  FlushRequest* req = flush_pool_.acquire();
  if (req == nullptr) {
    WEFT_WARN("%s: more than %d flushes in flight on one comm (NCCL keeps at most %d)",
              device_name().c_str(), kMaxRequests, kMaxRequests);
    return ncclInternalError;
  }
  // Each rail's NIC wrote through its own PCIe path: read back through each.
  const int rails = rail_count();
  req->start(&flush_owner_, rails, /*is_send=*/true);
  for (int r = 0; r < rails; ++r) req->set_posted_size(r, 0);
  for (int r = 0; r < rails; ++r) {
    const MemoryRegion* on_rail = region_on_rail(target, r);
    for (;;) {
      ssize_t rc = rail_endpoint(r).flush_read(target_data, on_rail->registration(), req->op(r));
      if (rc == 0) break;
      ncclResult_t result = rc == -FI_EAGAIN ? poll_rails() : ncclSystemError;
      if (result == ncclSuccess) continue;
      WEFT_WARN("%s: the flush read of GPU buffer %p failed: %s",
                rail_endpoint(r).device_name().c_str(), target_data,
                rc == -FI_EAGAIN ? "polling failed" : fi_strerror((int)-rc));
      if (r == 0) {
        flush_pool_.release(req);
        return result;
      }
      req->on_error(static_cast<uint32_t>(r), FI_EIO, 0, "posting a flush read failed");
      req->drop_unposted(rails - r - 1);
      *request = req;
      return ncclSuccess;
    }
  }
  *request = req;
  return ncclSuccess;
}

ncclResult_t OfiRecvComm::FlushOwner::progress() {
  return comm->progress();
}

void OfiRecvComm::FlushOwner::recycle(Request* request) {
  comm->flush_pool_.release(static_cast<FlushRequest*>(request));
}

ncclResult_t OfiRecvComm::FlushOwner::report_failure(int error, size_t, size_t, const char* text) {
  return completion_failure("flush read", comm->endpoint(), comm->peer_name(), error, 0, 0, text);
}

ncclResult_t OfiRecvComm::progress() {
  if (!path_.chosen()) return poll_rails();
  return path_.apply([](auto& path) { return path.progress(); });
}

void OfiRecvComm::on_complete(uint32_t, size_t, const uint64_t*) {
  ack_done_.store(true, std::memory_order_release);
}

void OfiRecvComm::on_error(uint32_t, int error, size_t, const char* text) {
  WEFT_WARN("%s: acknowledgement to %s failed: %s (%s)", device_name().c_str(), peer_name().c_str(),
            fi_strerror(error), text);
  if (error != FI_ECANCELED) ack_failed_.store(true, std::memory_order_relaxed);
  ack_done_.store(true, std::memory_order_release);
}

bool OfiRecvComm::ack_delivered(ncclResult_t* result) {
  *result = ncclSuccess;
  if (!ack_done_.load(std::memory_order_acquire)) {
    *result = endpoint().poll();
    if (*result != ncclSuccess || !ack_done_.load(std::memory_order_acquire)) return false;
  }
  if (ack_failed_.load(std::memory_order_relaxed)) {
    *result = ncclRemoteError;
    return false;
  }
  return true;
}

bool OfiRecvComm::in_flight() {
  if (path_.apply([](auto& path) { return path.in_flight(); })) return true;
  if (ack_posted_ && !ack_done_.load(std::memory_order_acquire)) return true;
  return flush_pool_.any_in_use([](FlushRequest& flush) { return !flush.finished(); });
}

void OfiRecvComm::cancel_receives() {
  path_.apply([](auto& path) { path.cancel_receives(); });
}

}  // namespace weft::ofi
