#include "verbs/recv_comm.h"

#include <arpa/inet.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "core/cuda/cuda_driver.h"

namespace weft::verbs {

VerbsRecvComm::VerbsRecvComm(ConnectionSetup setup, const RecvOptions& options, uint32_t listen_id)
    : VerbsDataComm<RecvComm>(std::move(setup)), options_(options), listen_id_(listen_id) {}

VerbsRecvComm::~VerbsRecvComm() {
  flush_qps_.reset();
  release_control(control_, control_region_);
}

bool VerbsRecvComm::prepare(const uint8_t* sender_info, std::string* error) {
  if (!allocate_control(&control_, &control_region_, "sizes FIFO", error)) return false;
  if (options_.flush == FlushMethod::Read && port().gpu_memory() && !make_flush_pair(error)) {
    return false;
  }
  exchange_.start_receiver([this](const ConnectionInfo& remote, ConnectionInfo* local,
                                  std::string* failure) { return connect(remote, local, failure); },
                           sender_info);
  return true;
}

bool VerbsRecvComm::make_flush_pair(std::string* error) {
  QpCapacity capacity{kMaxRequests + 2, 2, 0};
  if (!flush_qps_.create(port(), 2, capacity, error)) return false;
  ConnectionInfo self;
  self.link_layer = port().address().link_layer;
  self.lid = port().address().lid;
  self.mtu = port().address().active_mtu;
  std::memcpy(self.gid, port().address().gid, 16);
  return flush_qps_.connect(0, flush_qps_.qp(1)->qp_num, self, options_.qp_settings, error) &&
         flush_qps_.connect(1, flush_qps_.qp(0)->qp_num, self, options_.qp_settings, error);
}

bool VerbsRecvComm::connect(const ConnectionInfo& remote, ConnectionInfo* local,
                            std::string* error) {
  if (remote.link_layer != port().address().link_layer) {
    *error = "the peer's port is " +
             std::string(remote.link_layer == LinkLayer::Ethernet ? "RoCE" : "InfiniBand") +
             ", this one is not: check WEFT_IB_HCA on both nodes";
    return false;
  }
  if (remote.listen_id != listen_id_) {
    *error = "the peer connects with the handle of listener " + std::to_string(remote.listen_id) +
             ", this is listener " + std::to_string(listen_id_) + " (a stale handle?)";
    return false;
  }
  remote_ = remote;
  split_data_ = remote.split_data;
  // Per queue pair: a receive per message in flight, and the clear-to-send
  // writes. Those are signaled one in 8: a send-queue entry comes back only
  // when a later signaled completion is polled, so up to 7 entries of
  // earlier rounds plus a whole FIFO of new ones may be held.
  QpCapacity capacity{2 * kFifoSlots + 8, kFifoSlots + 4, 256};
  if (!qps().create(port(), remote.qp_count, capacity, error)) return false;
  // Take the sender's ECE offer and answer with what the queue pairs then
  // hold; on refusal neither side sets any.
  if (remote.ece && options_.qp_settings.ece) {
    std::string why;
    if (qps().set_ece(remote.ece_vendor_id, remote.ece_options, &why)) {
      local->ece = qps().query_ece(&local->ece_vendor_id, &local->ece_options);
    } else {
      WEFT_INFO(NCCL_NET, "%s: connection from %s without ECE: %s", port().name().c_str(),
                peer_name().c_str(), why.c_str());
    }
  }
  for (int q = 0; q < qps().count(); ++q) {
    if (!qps().connect(q, remote.qpn[q], remote, options_.qp_settings, error)) return false;
  }
  const PortAddress& address = port().address();
  local->role = Role::Receiver;
  local->link_layer = address.link_layer;
  local->qp_count = remote.qp_count;
  local->mtu = address.active_mtu;
  local->lid = address.lid;
  local->listen_id = listen_id_;
  std::memcpy(local->gid, address.gid, 16);
  for (int q = 0; q < qps().count(); ++q) local->qpn[q] = qps().qp(q)->qp_num;
  local->fifo_address = reinterpret_cast<uint64_t>(control_->sizes);
  local->fifo_rkey = control_region_->rkey;
  local->split_data = split_data_;
  local->process = own_identity();
  local->link_key = own_link_key();
  return true;
}

SetupProgress VerbsRecvComm::advance_setup(std::string* error) {
  if (set_up()) return SetupProgress::Done;
  SetupProgress progress = exchange_.advance(carrier(), error);
  if (progress == SetupProgress::Done) watch_peer(remote_.process, remote_.link_key);
  return progress;
}

ncclResult_t VerbsRecvComm::irecv(int n, void** data, const size_t* sizes, const int* tags,
                                  void** mhandles, Request** request) {
  *request = nullptr;
  if (faulted()) return fault();
  if (n < 1 || n > kMaxRecvs) {
    WEFT_WARN("%s: irecv of %d buffers (1..%d)", port().name().c_str(), n, kMaxRecvs);
    return ncclInvalidArgument;
  }
  for (int i = 0; i < n; ++i) {
    auto* region = static_cast<MemoryHandle*>(mhandles[i]);
    if (sizes[i] > 0 && (region == nullptr || region->magic != MemoryHandle::kMagic)) {
      WEFT_WARN(
          "%s: irecv buffer %d (%zu bytes) with mhandle %p, which is not a weft verbs "
          "registration",
          port().name().c_str(), i, sizes[i], mhandles[i]);
      return ncclInvalidArgument;
    }
  }
  const int s = fifo_slot(sequence_);
  Slot& slot = slots_[static_cast<size_t>(s)];
  if (slot.request != nullptr) return ncclSuccess;  // NCCL tries again
  VerbsRequest* req = acquire_request(n);
  if (req == nullptr) return ncclSuccess;
  const int qp_count = qps().count();
  const int sets = split_data_ ? qp_count : 1;
  const int first = split_data_ ? 0 : static_cast<int>(sequence_ % qp_count);
  req->slot = s;
  req->pending = sets;
  for (int i = 0; i < n; ++i) {
    req->posted[i] = sizes[i];
    req->sizes[i] = 0;
  }
  slot.request = req;
  slot.sequence = sequence_;
  slot.sizes_in_fifo = false;

  for (int k = 0; k < sets; ++k) {
    ibv_recv_wr wr{};
    wr.wr_id = wr_id(WrKind::Data, static_cast<uint32_t>(s));
    ibv_recv_wr* bad = nullptr;
    int rc = ibv_post_recv(qps().qp((first + k) % qp_count), &wr, &bad);
    if (rc != 0) return fail(ncclSystemError, std::string("ibv_post_recv failed: ") + strerror(rc));
  }
  FifoEntry* group = control_->cts[s];
  for (int i = 0; i < n; ++i) {
    auto* region = static_cast<MemoryHandle*>(mhandles[i]);
    group[i] = FifoEntry{reinterpret_cast<uint64_t>(data[i]),
                         sizes[i],
                         region != nullptr ? region->rkey : 0,
                         tags[i],
                         cts_sequence(sequence_),
                         static_cast<uint8_t>(n),
                         static_cast<uint8_t>(i),
                         0};
  }
  ibv_sge sge{reinterpret_cast<uint64_t>(group), static_cast<uint32_t>(n * sizeof(FifoEntry)),
              control_region_->lkey};
  ibv_send_wr wr{};
  wr.wr_id = wr_id(WrKind::Cts, static_cast<uint32_t>(s));
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_RDMA_WRITE;
  wr.wr.rdma.remote_addr =
      remote_.fifo_address + static_cast<uint64_t>(s) * kMaxRecvs * sizeof(FifoEntry);
  wr.wr.rdma.rkey = remote_.fifo_rkey;
  if (sge.length <= qps().capacity().inline_bytes) wr.send_flags = IBV_SEND_INLINE;
  // Unsignaled writes hold their send-queue entries until a later signaled
  // one completes.
  if (sequence_ % 8 == 0) wr.send_flags |= IBV_SEND_SIGNALED;
  ibv_send_wr* bad = nullptr;
  int rc = ibv_post_send(qps().qp(0), &wr, &bad);
  if (rc != 0) {
    return fail(ncclSystemError, std::string("posting the clear-to-send failed: ") + strerror(rc));
  }
  ++sequence_;
  *request = req;
  return ncclSuccess;
}

void VerbsRecvComm::on_completion(const ibv_wc& wc) {
  switch (wr_kind(wc.wr_id)) {
    case WrKind::Cts:
      return;
    case WrKind::Data:
      on_data(wc);
      return;
    case WrKind::Flush: {
      uint32_t index = wr_index(wc.wr_id);
      if (index < flushes_.size() && flushes_[index] != nullptr) {
        flushes_[index]->pending = 0;
        flushes_[index] = nullptr;
        --flushes_pending_;
      }
      return;
    }
  }
  fail(ncclInternalError, "completion with an unknown work request id");
}

void VerbsRecvComm::on_data(const ibv_wc& wc) {
  uint32_t s = wr_index(wc.wr_id);
  VerbsRequest* req = s < kFifoSlots ? slots_[s].request : nullptr;
  if (wc.opcode != IBV_WC_RECV_RDMA_WITH_IMM || req == nullptr || req->pending <= 0) {
    fail(ncclRemoteError, "the peer completed a receive that was not posted (opcode " +
                              std::to_string(wc.opcode) + ")");
    return;
  }
  Slot& slot = slots_[s];
  std::string error;
  size_t size = 0;
  switch (decode_immediate(ntohl(wc.imm_data), req->count, slot.sequence, req->posted[0], &size,
                           &error)) {
    case ImmKind::Invalid:
      fail(ncclRemoteError, error);
      return;
    case ImmKind::Truncated:
      WEFT_WARN("%s: receive from %s: %s", port().name().c_str(), peer_name().c_str(),
                error.c_str());
      req->result = ncclInvalidUsage;
      break;
    case ImmKind::Size:
      req->sizes[0] = size;
      break;
    case ImmKind::SizesInFifo:
      slot.sizes_in_fifo = true;
      break;
  }
  if (--req->pending > 0) return;
  if (slot.sizes_in_fifo && req->result == ncclSuccess) {
    for (int i = 0; i < req->count; ++i) {
      uint64_t sent = control_->sizes[s][i];
      if (sent > req->posted[i]) {
        WEFT_WARN(
            "%s: receive %d of a group from %s: message truncated: %llu bytes sent to %zu "
            "posted",
            port().name().c_str(), i, peer_name().c_str(), static_cast<unsigned long long>(sent),
            req->posted[i]);
        req->result = ncclInvalidUsage;
        break;
      }
      req->sizes[i] = sent;
    }
  }
  slot.request = nullptr;
}

void VerbsRecvComm::release_slot(VerbsRequest* request) {
  // A request given back before it finished (failure): its slot is dead.
  // request->slot names its FIFO slot, or its flush index (count 0).
  auto index = static_cast<size_t>(request->slot);
  if (request->count == 0) {
    if (index < flushes_.size() && flushes_[index] == request) {
      flushes_[index] = nullptr;
      --flushes_pending_;
    }
  } else if (index < slots_.size() && slots_[index].request == request) {
    slots_[index].request = nullptr;
  }
}

ncclResult_t VerbsRecvComm::progress() {
  ncclResult_t result = poll_cq(qps().cq());
  if (result == ncclSuccess && flushes_pending_ > 0) result = poll_cq(flush_qps_.cq());
  return result;
}

ncclResult_t VerbsRecvComm::iflush(int n, void** data, const int* sizes, void** mhandles,
                                   Request** request) {
  *request = nullptr;
  if (faulted()) return fault();
  int last = -1;
  for (int i = 0; i < n; ++i) {
    auto* region = static_cast<MemoryHandle*>(mhandles[i]);
    if (sizes[i] > 0 && region != nullptr && region->magic == MemoryHandle::kMagic &&
        region->type == NCCL_PTR_CUDA) {
      last = i;
    }
  }
  if (last < 0 || options_.flush == FlushMethod::None) return ncclSuccess;  // nothing to flush
  if (options_.flush == FlushMethod::Cuda) {
    std::string error;
    if (!port().cuda()->flush_rdma_writes(&error)) {
      WEFT_WARN("%s: %s", port().name().c_str(), error.c_str());
      return ncclUnhandledCudaError;
    }
    return ncclSuccess;
  }
  uint32_t index = 0;
  while (index < flushes_.size() && flushes_[index] != nullptr) ++index;
  if (index == flushes_.size()) return ncclSuccess;  // NCCL tries again
  VerbsRequest* req = acquire_request(0);
  if (req == nullptr) return ncclSuccess;
  req->pending = 1;
  req->slot = static_cast<int>(index);
  flushes_[index] = req;
  ++flushes_pending_;
  ibv_sge sge{reinterpret_cast<uint64_t>(control_->flush_target), 1, control_region_->lkey};
  ibv_send_wr wr{};
  wr.wr_id = wr_id(WrKind::Flush, index);
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_RDMA_READ;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.wr.rdma.remote_addr = reinterpret_cast<uint64_t>(data[last]);
  wr.wr.rdma.rkey = static_cast<MemoryHandle*>(mhandles[last])->rkey;
  ibv_send_wr* bad = nullptr;
  int rc = ibv_post_send(flush_qps_.qp(0), &wr, &bad);
  if (rc != 0) {
    release(req);
    return fail(ncclSystemError, std::string("posting the flush read failed: ") + strerror(rc));
  }
  *request = req;
  return ncclSuccess;
}

}  // namespace weft::verbs
