#include "verbs/rma_comm.h"

#include <cerrno>
#include <chrono>
#include <cstring>

#include "core/handle_header.h"
#include "core/listen_secret.h"
#include "core/rma_connect.h"
#include "core/rma_record.h"
#include "verbs/wire.h"
#include "weft/log.h"

namespace weft::verbs {
namespace {

// Send queue depth per queue pair: a block's operations beyond it wait in
// their channel (RmaWire::Posted::Busy) until completions make room.
constexpr uint32_t kSendDepth = 1024;
// RDMA reads in flight per queue pair, each way (devices allow 16 or more).
constexpr int kReadDepth = 16;

std::string errno_text(const char* call, int rc) {
  return std::string(call) + ": " + std::strerror(rc);
}

}  // namespace

ncclResult_t VerbsRmaComm::connect(void* const* handles, int nranks, int rank,
                                   VerbsRmaListenComm* listen, int timeout_ms,
                                   std::unique_ptr<VerbsRmaComm>* out) {
  const std::string& device = listen->port->name();
  std::vector<SocketAddress> addresses(nranks > 0 ? static_cast<size_t>(nranks) : 0);
  RmaHandleRules rules;
  rules.transport = TransportId::VerbsRma;
  rules.fingerprint = listen->fingerprint;
  rules.fingerprint_mismatch = "another link layer (InfiniBand and RoCE do not mix)";
  rules.check_payload = [&](int r, const ListenHandle& handle, std::string* problem) {
    return SocketAddress::unpack(handle.payload, handle.payload_size,
                                 &addresses[static_cast<size_t>(r)], problem);
  };
  const std::string own_address = listen->listener->address().text();
  rules.is_own = [&](const ListenHandle& handle) {
    SocketAddress address;
    std::string ignored;
    return handle.listen_id == listen->id &&
           SocketAddress::unpack(handle.payload, handle.payload_size, &address, &ignored) &&
           address.text() == own_address;
  };
  std::vector<ListenHandle> decoded;
  if (ncclResult_t result = decode_rma_handles(handles, nranks, rank, device, rules, &decoded);
      result != ncclSuccess) {
    return result;
  }
  std::unique_ptr<VerbsRmaComm> comm(
      new VerbsRmaComm(listen->port, rank, nranks, timeout_ms, listen->message_signals));
  for (const ListenHandle& handle : decoded) comm->listen_ids_.push_back(handle.listen_id);
  comm->set_rank_secrets(decoded);
  if (ncclResult_t result = comm->open(*listen, std::move(addresses)); result != ncclSuccess) {
    return result;
  }
  WEFT_INFO(NCCL_NET,
            "%s: one-sided comm of %d ranks ready (rank %d, signals by %s); ranks are met on "
            "first use",
            device.c_str(), nranks, rank, comm->message_signals_ ? "message" : "fetch-and-add");
  *out = std::move(comm);
  return ncclSuccess;
}

VerbsRmaComm::VerbsRmaComm(std::shared_ptr<OpenPort> port, int rank, int nranks, int timeout_ms,
                           bool message_signals)
    : SymmetricComm(rank, nranks, timeout_ms > 0 ? timeout_ms : 1),
      port_(std::move(port)),
      message_signals_(message_signals) {}

VerbsRmaComm::~VerbsRmaComm() {
  close_all();
  links_.reset();
  qps_.reset();  // no receive lands in the inbox after this
  if (inbox_region_ != nullptr) port_->deregister_memory(inbox_region_);
}

ncclResult_t VerbsRmaComm::open(VerbsRmaListenComm& listen, std::vector<SocketAddress> addresses) {
  const int nranks = rank_count();
  const int self = rank();
  const std::string& device = device_name();
  listen_id_ = listen.id;
  settings_ = listen.settings;
  settings_.rd_atomic = kReadDepth;
  settings_.ece = false;
  // The completion queue has room for every rank's queue pair; the queue
  // pairs come as ranks are met.
  QpCapacity capacity{kSendDepth, message_signals_ ? uint32_t{kSignalSlots} : 1, 0};
  std::string error;
  if (!qps_.create_completion_queue(*port_, nranks, capacity, &error)) {
    WEFT_WARN("one-sided connect on %s: %s", device.c_str(), error.c_str());
    return ncclSystemError;
  }
  if (message_signals_) {
    const size_t slots = static_cast<size_t>(nranks) * kSignalSlots;
    inbox_ = std::make_unique<uint8_t[]>(slots * kRmaSignalSize);
    ncclResult_t result = port_->register_memory(inbox_.get(), slots * kRmaSignalSize,
                                                 NCCL_PTR_HOST, -1, 0, &inbox_region_);
    if (result != ncclSuccess) return result;
    inbox_ops_ = std::make_unique<RmaOp[]>(slots);
    for (size_t i = 0; i < slots; ++i) inbox_ops_[i] = RmaOp{this, static_cast<uint32_t>(i)};
  }
  // Its own queue pair, to itself (NCCL's graph flush puts to itself).
  const auto me = static_cast<uint32_t>(self);
  uint8_t own[kConnectionInfoSize];
  bool opened = open_queue_pair(me, &error);
  if (opened) {
    encode_queue_pair(me, own);
    opened = connect_queue_pair(me, own, &error);
  }
  if (!opened) {
    WEFT_WARN("one-sided connect on %s: %s", device.c_str(), error.c_str());
    return ncclSystemError;
  }
  links_ = std::make_unique<RmaPeerLinks>(*this, std::move(listen.listener), std::move(addresses),
                                          ask_timeout_ms());
  if (!links_->open(&error)) {
    WEFT_WARN("one-sided connect on %s: %s", device.c_str(), error.c_str());
    return ncclSystemError;
  }
  return ncclSuccess;
}

bool VerbsRmaComm::open_queue_pair(uint32_t rank, std::string* error) {
  if (qps_.is_open(static_cast<int>(rank))) return true;
  if (!qps_.open(static_cast<int>(rank), error)) return false;
  if (!message_signals_) return true;
  // Posted before the rank hears of this queue pair: no signal finds none.
  for (uint32_t k = 0; k < static_cast<uint32_t>(kSignalSlots); ++k) {
    if (post_signal_receive(rank * kSignalSlots + k) != ncclSuccess) {
      *error = "posting receives for rank " + std::to_string(rank) + "'s signals failed";
      return false;
    }
  }
  return true;
}

void VerbsRmaComm::encode_queue_pair(uint32_t rank, uint8_t* out) const {
  const PortAddress& address = port_->address();
  ConnectionInfo info;
  info.role = Role::OneSided;
  info.link_layer = address.link_layer;
  info.qp_count = 1;
  info.mtu = address.active_mtu;
  info.lid = address.lid;
  info.listen_id = listen_id_;
  std::memcpy(info.gid, address.gid, 16);
  info.qpn[0] = qps_.is_open(static_cast<int>(rank)) ? qps_.qp(static_cast<int>(rank))->qp_num : 0;
  encode_connection_info(info, out);
}

bool VerbsRmaComm::connect_queue_pair(uint32_t rank, const uint8_t* bytes, std::string* error) {
  ConnectionInfo remote;
  if (!decode_connection_info(bytes, kConnectionInfoSize, Role::OneSided, &remote, error)) {
    *error = "its queue pair address is refused: " + *error;
    return false;
  }
  if (remote.listen_id != listen_ids_[rank]) {
    *error = "it is not the rank whose handle says so (listen " + std::to_string(remote.listen_id) +
             ", handle " + std::to_string(listen_ids_[rank]) + ")";
    return false;
  }
  if (remote.link_layer != port_->address().link_layer) {
    *error = "its port has another link layer";
    return false;
  }
  return open_queue_pair(rank, error) &&
         qps_.connect(static_cast<int>(rank), remote.qpn[0], remote, settings_, error);
}

void VerbsRmaComm::send_on_demand(uint32_t rank, const RmaRecord& record) {
  links_->send(rank, record);
}

ncclResult_t VerbsRmaComm::register_local(void* data, size_t size, int type, int dmabuf_fd,
                                          uint64_t dmabuf_offset, void** local, void** descriptor,
                                          uint64_t* address, uint64_t* key) {
  MemoryHandle* handle = nullptr;
  ncclResult_t result = port_->register_memory(data, size, type, dmabuf_fd, dmabuf_offset, &handle);
  if (result != ncclSuccess) return result;
  *local = handle;
  *descriptor = handle;
  *address = reinterpret_cast<uint64_t>(data);
  *key = handle->rkey;
  return ncclSuccess;
}

ncclResult_t VerbsRmaComm::deregister_local(void* local) {
  return port_->deregister_memory(static_cast<MemoryHandle*>(local));
}

ncclResult_t VerbsRmaComm::register_operands(void* data, size_t size, void** region,
                                             void** descriptor) {
  MemoryHandle* handle = nullptr;
  ncclResult_t result = port_->register_memory(data, size, NCCL_PTR_HOST, -1, 0, &handle);
  *region = handle;
  *descriptor = handle;
  return result;
}

void VerbsRmaComm::deregister_operands(void* region) {
  port_->deregister_memory(static_cast<MemoryHandle*>(region));
}

std::unique_ptr<RmaBlockBase> VerbsRmaComm::make_block(const RmaContextConfig& config,
                                                       ncclResult_t* result) {
  auto block = std::make_unique<RmaBlock<RmaOp>>(*this, *this, config);
  *result = block->open();
  return block;
}

VerbsRmaComm::Posted VerbsRmaComm::post(uint32_t rank, ibv_send_wr& wr, const char* call,
                                        std::string* error) {
  ibv_qp* qp = qps_.qp(static_cast<int>(rank));
  if (qp == nullptr) {
    // Only a rank met has windows to address: not reached.
    *error = std::string(call) + ": rank " + std::to_string(rank) + " was never met";
    return Posted::Failed;
  }
  ibv_send_wr* bad = nullptr;
  int rc = ibv_post_send(qp, &wr, &bad);
  if (rc == 0) return Posted::Done;
  // A full send queue: completions will make room.
  if (rc == ENOMEM) return Posted::Busy;
  *error = errno_text(call, rc);
  return Posted::Failed;
}

VerbsRmaComm::Posted VerbsRmaComm::post_rdma(uint32_t rank, ibv_wr_opcode opcode, uint8_t* local,
                                             size_t length, void* descriptor, uint64_t remote,
                                             uint64_t key, RmaOp* op, const char* call,
                                             std::string* error) {
  ibv_sge sge{reinterpret_cast<uint64_t>(local), static_cast<uint32_t>(length),
              static_cast<MemoryHandle*>(descriptor)->lkey};
  ibv_send_wr wr{};
  wr.wr_id = reinterpret_cast<uint64_t>(op);
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = opcode;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.wr.rdma.remote_addr = remote;
  wr.wr.rdma.rkey = static_cast<uint32_t>(key);
  return post(rank, wr, call, error);
}

VerbsRmaComm::Posted VerbsRmaComm::write(uint32_t rank, uint8_t* local, size_t length,
                                         void* descriptor, uint64_t remote, uint64_t key, RmaOp* op,
                                         std::string* error) {
  return post_rdma(rank, IBV_WR_RDMA_WRITE, local, length, descriptor, remote, key, op,
                   "ibv_post_send(RDMA write)", error);
}

VerbsRmaComm::Posted VerbsRmaComm::read(uint32_t rank, uint8_t* local, size_t length,
                                        void* descriptor, uint64_t remote, uint64_t key, RmaOp* op,
                                        std::string* error) {
  return post_rdma(rank, IBV_WR_RDMA_READ, local, length, descriptor, remote, key, op,
                   "ibv_post_send(RDMA read)", error);
}

VerbsRmaComm::Posted VerbsRmaComm::signal(uint32_t rank, uint64_t* operand,
                                          void* operand_descriptor, uint64_t remote, uint64_t key,
                                          RmaOp* op, std::string* error) {
  const uint32_t lkey = static_cast<MemoryHandle*>(operand_descriptor)->lkey;
  ibv_send_wr wr{};
  wr.wr_id = reinterpret_cast<uint64_t>(op);
  wr.num_sge = 1;
  wr.send_flags = IBV_SEND_SIGNALED;
  if (message_signals_) {
    ibv_sge sge{reinterpret_cast<uint64_t>(operand), static_cast<uint32_t>(kRmaSignalSize), lkey};
    wr.sg_list = &sge;
    wr.opcode = IBV_WR_SEND;
    return post(rank, wr, "ibv_post_send(signal message)", error);
  }
  // The value goes out as the add; the word's old value comes back into
  // the same operand (not used).
  ibv_sge sge{reinterpret_cast<uint64_t>(operand), 8, lkey};
  wr.sg_list = &sge;
  wr.opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;
  wr.wr.atomic.remote_addr = remote;
  wr.wr.atomic.compare_add = *operand;
  wr.wr.atomic.rkey = static_cast<uint32_t>(key);
  return post(rank, wr, "ibv_post_send(fetch-and-add)", error);
}

ncclResult_t VerbsRmaComm::post_signal_receive(uint32_t slot) {
  const uint32_t rank = slot / kSignalSlots;
  ibv_sge sge{reinterpret_cast<uint64_t>(inbox_.get() + size_t{slot} * kRmaSignalSize),
              static_cast<uint32_t>(kRmaSignalSize), inbox_region_->lkey};
  ibv_recv_wr wr{};
  wr.wr_id = reinterpret_cast<uint64_t>(&inbox_ops_[slot]);
  wr.sg_list = &sge;
  wr.num_sge = 1;
  ibv_recv_wr* bad = nullptr;
  int rc = ibv_post_recv(qps_.qp(static_cast<int>(rank)), &wr, &bad);
  if (rc == 0) return ncclSuccess;
  WEFT_WARN("%s: posting a receive for signals from rank %u: %s", device_name().c_str(), rank,
            std::strerror(rc));
  return ncclSystemError;
}

void VerbsRmaComm::on_complete(uint32_t slot, size_t length, const uint64_t*) {
  RmaSignal signal;
  std::string error;
  if (!decode_rma_signal(inbox_.get() + size_t{slot} * kRmaSignalSize, length,
                         static_cast<uint32_t>(rank_count()), &signal, &error)) {
    WEFT_WARN("%s: a signal message from rank %u is refused: %s", device_name().c_str(),
              slot / kSignalSlots, error.c_str());
  } else {
    apply_signal(signal, device_name());
  }
  if (post_signal_receive(slot) != ncclSuccess) {
    receive_failed_.store(true, std::memory_order_relaxed);
  }
}

void VerbsRmaComm::on_error(uint32_t slot, int, size_t, const char* text) {
  // Flushed at close, or the queue pair broke: the sender's side reports it.
  WEFT_TRACE("%s: signal receive from rank %u ended: %s", device_name().c_str(),
             slot / kSignalSlots, text);
}

ncclResult_t VerbsRmaComm::progress() {
  ibv_wc completions[16];
  for (;;) {
    int n = ibv_poll_cq(qps_.cq(), 16, completions);
    if (n < 0) {
      WEFT_WARN("%s: ibv_poll_cq on a one-sided comm failed (%d)", device_name().c_str(), n);
      return ncclSystemError;
    }
    for (int i = 0; i < n; ++i) {
      const ibv_wc& wc = completions[i];
      auto* op = reinterpret_cast<RmaOp*>(wc.wr_id);
      if (wc.status == IBV_WC_SUCCESS) {
        op->target->on_complete(op->slot, wc.byte_len, nullptr);
      } else {
        op->target->on_error(op->slot, EIO, 0, port_->api().wc_status_str(wc.status));
      }
    }
    if (n < 16) break;
  }
  if (receive_failed_.load(std::memory_order_relaxed)) {
    WEFT_WARN("%s: receives for signal messages could not be posted again", device_name().c_str());
    return ncclSystemError;
  }
  links_->service();
  expire_asks();
  return ncclSuccess;
}

}  // namespace weft::verbs
