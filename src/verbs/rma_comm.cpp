#include "verbs/rma_comm.h"

#include <cerrno>
#include <chrono>
#include <cstring>

#include "core/handle_header.h"
#include "core/idle_backoff.h"
#include "core/listen_secret.h"
#include "core/rma_connect.h"
#include "core/rma_record.h"
#include "verbs/wire.h"
#include "weft/log.h"

namespace weft::verbs {
namespace {

using Clock = std::chrono::steady_clock;

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
  if (ncclResult_t result = comm->join(addresses, *listen); result != ncclSuccess) return result;
  WEFT_INFO(NCCL_NET, "%s: one-sided comm of %d ranks connected (rank %d, signals by %s)",
            device.c_str(), nranks, rank, comm->message_signals_ ? "message" : "fetch-and-add");
  *out = std::move(comm);
  return ncclSuccess;
}

VerbsRmaComm::VerbsRmaComm(std::shared_ptr<OpenPort> port, int rank, int nranks, int timeout_ms,
                           bool message_signals)
    : SymmetricComm(rank, nranks),
      port_(std::move(port)),
      timeout_ms_(timeout_ms),
      message_signals_(message_signals) {}

VerbsRmaComm::~VerbsRmaComm() {
  close_all();
  qps_.reset();  // no receive lands in the inbox after this
  if (inbox_region_ != nullptr) port_->deregister_memory(inbox_region_);
}

ncclResult_t VerbsRmaComm::join(const std::vector<SocketAddress>& addresses,
                                VerbsRmaListenComm& listen) {
  const int nranks = rank_count();
  const int self = rank();
  const std::string& device = device_name();
  for (const SocketAddress& address : addresses) names_.push_back(address.text());

  QpCapacity capacity{kSendDepth, message_signals_ ? uint32_t{kSignalSlots} : 1, 0};
  std::string error;
  if (!qps_.create(*port_, nranks, capacity, &error)) {
    WEFT_WARN("one-sided connect on %s: %s", device.c_str(), error.c_str());
    return ncclSystemError;
  }
  if (message_signals_) {
    // Posted before any rank hears from this one: no signal finds none.
    const size_t slots = static_cast<size_t>(nranks) * kSignalSlots;
    inbox_ = std::make_unique<uint8_t[]>(slots * kRmaSignalSize);
    ncclResult_t result = port_->register_memory(inbox_.get(), slots * kRmaSignalSize,
                                                 NCCL_PTR_HOST, -1, 0, &inbox_region_);
    if (result != ncclSuccess) return result;
    inbox_ops_ = std::make_unique<RmaOp[]>(slots);
    for (size_t i = 0; i < slots; ++i) {
      inbox_ops_[i] = RmaOp{this, static_cast<uint32_t>(i)};
      if (ncclResult_t posted = post_signal_receive(static_cast<uint32_t>(i));
          posted != ncclSuccess) {
        return posted;
      }
    }
  }

  // Who is who: each rank connects to every higher rank and says hello;
  // the higher one learns the lower one's rank from it.
  streams_.resize(static_cast<size_t>(nranks));
  const uint32_t round = take_round();
  RmaRecord hello;
  hello.kind = RmaRecordKind::Hello;
  hello.rank = static_cast<uint32_t>(self);
  hello.ranks = static_cast<uint32_t>(nranks);
  hello.round = round;
  hello.proof = own_proof();
  uint8_t hello_bytes[kRmaRecordSize];
  encode_rma_record(hello, hello_bytes);
  const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms_);
  std::vector<bool> greeted(static_cast<size_t>(nranks), false);
  for (int r = self + 1; r < nranks; ++r) {
    if (!TcpStream::connect(addresses[static_cast<size_t>(r)], &streams_[static_cast<size_t>(r)],
                            &error, kOpenListenerRefusalGrace)) {
      WEFT_WARN("one-sided connect on %s: rank %d: %s", device.c_str(), r, error.c_str());
      return ncclRemoteError;
    }
  }
  struct Newcomer {
    TcpStream stream;
    uint8_t hello[kRmaRecordSize] = {};
  };
  std::vector<Newcomer> newcomers;
  int identified = 0;
  int sent = 0;
  const int higher = nranks - 1 - self;
  IdleBackoff backoff;
  while (identified < self || sent < higher) {
    const int done_before = identified + sent;
    TcpStream accepted;
    if (!listen.listener->accept(&accepted, &error)) {
      WEFT_WARN("one-sided connect on %s: accepting: %s", device.c_str(), error.c_str());
      return ncclSystemError;
    }
    if (accepted.valid()) newcomers.push_back(Newcomer{std::move(accepted), {}});
    for (auto it = newcomers.begin(); it != newcomers.end();) {
      TcpStream::Progress progress = it->stream.receive_all(it->hello, &error);
      if (progress == TcpStream::Progress::Pending) {
        ++it;
        continue;
      }
      RmaRecord record;
      RmaRecord expected = hello;
      // The proof first: whoever cannot give it was handed no handle of
      // this comm. Every refusal is rate-limited: anyone may connect here.
      std::string why;
      if (progress == TcpStream::Progress::Failed) {
        why = error;
      } else if (!rma_record_proven(it->hello, kRmaRecordSize, rank_secrets())) {
        why = "its hello proved no rank's listen secret";
      } else if (!decode_rma_record(it->hello, kRmaRecordSize, expected,
                                    static_cast<uint32_t>(self), &record, &error)) {
        why = error;
      } else if (record.rank >= static_cast<uint32_t>(self) || greeted[record.rank]) {
        why = "not a lower rank of this comm, or a second hello";
      }
      if (!why.empty()) {
        log_refused_connect("one-sided connect on " + device, it->stream.peer().text(), why);
        error.clear();
        it = newcomers.erase(it);
        continue;
      }
      greeted[record.rank] = true;
      streams_[record.rank] = std::move(it->stream);
      ++identified;
      it = newcomers.erase(it);
    }
    for (int r = self + 1; r < nranks; ++r) {
      if (greeted[static_cast<size_t>(r)]) continue;
      TcpStream::Progress progress = streams_[static_cast<size_t>(r)].send_all(hello_bytes, &error);
      if (progress == TcpStream::Progress::Failed) {
        WEFT_WARN("one-sided connect on %s: rank %d (%s): %s", device.c_str(), r,
                  names_[static_cast<size_t>(r)].c_str(), error.c_str());
        return ncclRemoteError;
      }
      if (progress == TcpStream::Progress::Done) {
        greeted[static_cast<size_t>(r)] = true;
        ++sent;
      }
    }
    // Setup waits on sockets only: give the core to the peers meanwhile.
    if (identified + sent > done_before) {
      backoff.reset();
    } else if (identified < self || sent < higher) {
      backoff.pause();
    }
    if ((identified < self || sent < higher) && Clock::now() > deadline) {
      std::vector<bool> heard(greeted.begin(), greeted.end());
      heard[static_cast<size_t>(self)] = true;
      warn_unheard("connect", device, self, timeout_ms_, unheard_ranks(heard, names_));
      return ncclRemoteError;
    }
  }

  // Queue pair addresses, one per pair of ranks, then every queue pair up.
  const PortAddress& address = port_->address();
  auto info_for = [&](int r) {
    ConnectionInfo info;
    info.role = Role::OneSided;
    info.link_layer = address.link_layer;
    info.qp_count = 1;
    info.mtu = address.active_mtu;
    info.lid = address.lid;
    info.listen_id = listen.id;
    std::memcpy(info.gid, address.gid, 16);
    info.qpn[0] = qps_.qp(r)->qp_num;
    return info;
  };
  std::vector<std::vector<uint8_t>> out(static_cast<size_t>(nranks));
  std::vector<std::vector<uint8_t>> in(static_cast<size_t>(nranks));
  for (int r = 0; r < nranks; ++r) {
    if (r == self) continue;
    out[static_cast<size_t>(r)].resize(kConnectionInfoSize);
    in[static_cast<size_t>(r)].resize(kConnectionInfoSize);
    encode_connection_info(info_for(r), out[static_cast<size_t>(r)].data());
  }
  if (!trade(out, &in, "connect")) return ncclRemoteError;
  QpSettings settings = listen.settings;
  settings.rd_atomic = kReadDepth;
  settings.ece = false;
  for (int r = 0; r < nranks; ++r) {
    ConnectionInfo remote;
    if (r == self) {
      remote = info_for(r);
    } else if (!decode_connection_info(in[static_cast<size_t>(r)].data(), kConnectionInfoSize,
                                       Role::OneSided, &remote, &error)) {
      WEFT_WARN("one-sided connect on %s: rank %d's queue pair address is refused: %s",
                device.c_str(), r, error.c_str());
      return ncclRemoteError;
    }
    if (r != self && remote.listen_id != listen_ids_[static_cast<size_t>(r)]) {
      WEFT_WARN(
          "one-sided connect on %s: the rank that answered as %d is not the one whose "
          "handle says so (listen %u, handle %u)",
          device.c_str(), r, remote.listen_id, listen_ids_[static_cast<size_t>(r)]);
      return ncclRemoteError;
    }
    if (remote.link_layer != address.link_layer) {
      WEFT_WARN("one-sided connect on %s: rank %d's port has another link layer", device.c_str(),
                r);
      return ncclInvalidUsage;
    }
    if (!qps_.connect(r, remote.qpn[0], remote, settings, &error)) {
      WEFT_WARN("one-sided connect on %s: queue pair to rank %d: %s", device.c_str(), r,
                error.c_str());
      return ncclSystemError;
    }
  }
  // Nobody writes before every rank's queue pairs are up.
  for (int r = 0; r < nranks; ++r) {
    if (r == self) continue;
    out[static_cast<size_t>(r)].assign(1, 1);
    in[static_cast<size_t>(r)].assign(1, 0);
  }
  return trade(out, &in, "connect") ? ncclSuccess : ncclRemoteError;
}

bool VerbsRmaComm::trade(const std::vector<std::vector<uint8_t>>& out,
                         std::vector<std::vector<uint8_t>>* in, const char* what) {
  const int nranks = rank_count();
  const int self = rank();
  std::vector<uint8_t> sent(static_cast<size_t>(nranks), 0);
  std::vector<uint8_t> received(static_cast<size_t>(nranks), 0);
  sent[static_cast<size_t>(self)] = received[static_cast<size_t>(self)] = 1;
  int remaining = 2 * (nranks - 1);
  const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms_);
  std::string error;
  IdleBackoff backoff;
  while (remaining > 0) {
    const int remaining_before = remaining;
    for (int r = 0; r < nranks; ++r) {
      const size_t i = static_cast<size_t>(r);
      TcpStream& stream = streams_[i];
      if (!sent[i]) {
        TcpStream::Progress progress = stream.send_all(out[i], &error);
        if (progress == TcpStream::Progress::Done) {
          sent[i] = 1;
          --remaining;
        }
      }
      if (error.empty() && !received[i]) {
        TcpStream::Progress progress = stream.receive_all((*in)[i], &error);
        if (progress == TcpStream::Progress::Done) {
          received[i] = 1;
          --remaining;
        }
      }
      if (!error.empty()) {
        WEFT_WARN("one-sided %s on %s: rank %d (%s): %s", what, device_name().c_str(), r,
                  names_[i].c_str(), error.c_str());
        return false;
      }
    }
    if (remaining < remaining_before) {
      backoff.reset();
    } else {
      backoff.pause();
    }
    if (remaining > 0 && Clock::now() > deadline) {
      std::vector<bool> heard(received.begin(), received.end());
      warn_unheard(what, device_name(), self, timeout_ms_, unheard_ranks(heard, names_));
      return false;
    }
  }
  return true;
}

ncclResult_t VerbsRmaComm::exchange(const RmaRecord& mine, uint32_t round,
                                    std::vector<RmaRecord>* all, const char* what) {
  const int nranks = rank_count();
  const int self = rank();
  RmaRecord expected = mine;
  expected.rank = static_cast<uint32_t>(self);
  expected.ranks = static_cast<uint32_t>(nranks);
  expected.round = round;
  expected.proof = own_proof();
  all->assign(static_cast<size_t>(nranks), expected);
  if (nranks == 1) return ncclSuccess;
  std::vector<std::vector<uint8_t>> out(static_cast<size_t>(nranks));
  std::vector<std::vector<uint8_t>> in(static_cast<size_t>(nranks));
  for (int r = 0; r < nranks; ++r) {
    if (r == self) continue;
    out[static_cast<size_t>(r)].resize(kRmaRecordSize);
    in[static_cast<size_t>(r)].resize(kRmaRecordSize);
    encode_rma_record(expected, out[static_cast<size_t>(r)].data());
  }
  if (!trade(out, &in, what)) return ncclRemoteError;
  for (int r = 0; r < nranks; ++r) {
    if (r == self) continue;
    RmaRecord record;
    std::string error;
    if (!rma_record_proven(in[static_cast<size_t>(r)].data(), kRmaRecordSize, rank_secrets())) {
      error = "it proves no rank's listen secret";
    }
    if (!error.empty() ||
        !decode_rma_record(in[static_cast<size_t>(r)].data(), kRmaRecordSize, expected,
                           static_cast<uint32_t>(self), &record, &error) ||
        record.rank != static_cast<uint32_t>(r)) {
      WEFT_WARN("one-sided %s on %s: rank %d's setup message is refused: %s", what,
                device_name().c_str(), r, error.empty() ? "it names another rank" : error.c_str());
      return ncclRemoteError;
    }
    (*all)[static_cast<size_t>(r)] = record;
  }
  return ncclSuccess;
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
  ibv_send_wr* bad = nullptr;
  int rc = ibv_post_send(qps_.qp(static_cast<int>(rank)), &wr, &bad);
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
  return ncclSuccess;
}

}  // namespace weft::verbs
