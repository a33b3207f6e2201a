#include "verbs/send_comm.h"

#include <arpa/inet.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "core/net_events.h"

namespace weft::verbs {
namespace {

// The part of a message queue pair `k` of `sets` carries: 128-byte aligned
// chunks, as NCCL splits them.
void chunk_of(size_t size, int k, int sets, size_t* offset, size_t* length) {
  if (sets == 1) {
    *offset = 0;
    *length = size;
    return;
  }
  size_t chunk = (size + static_cast<size_t>(sets) - 1) / static_cast<size_t>(sets);
  chunk = (chunk + 127) & ~size_t{127};
  *offset = chunk * static_cast<size_t>(k);
  *length = *offset >= size ? 0 : std::min(chunk, size - *offset);
}

}  // namespace

VerbsSendComm::VerbsSendComm(ConnectionSetup setup, const SendOptions& options, uint32_t listen_id,
                             uint64_t listen_secret)
    : VerbsDataComm<SendComm>(std::move(setup)),
      options_(options),
      listen_id_(listen_id),
      listen_secret_(listen_secret) {}

VerbsSendComm::~VerbsSendComm() {
  release_control(control_, control_region_);
}

bool VerbsSendComm::prepare(std::string* error) {
  if (!allocate_control(&control_, &control_region_, "FIFO", error)) return false;
  exchange_.start_sender(
      local_info(), [this](const ConnectionInfo& remote, ConnectionInfo*, std::string* failure) {
        if (remote.qp_count != options_.qp_count) {
          *failure = "the receiver answered with " + std::to_string(remote.qp_count) +
                     " queue pairs, " + std::to_string(options_.qp_count) + " asked for";
          return false;
        }
        if (remote.link_layer != port().address().link_layer) {
          *failure = "the peer's port is " +
                     std::string(remote.link_layer == LinkLayer::Ethernet ? "RoCE" : "InfiniBand") +
                     ", this one is not: check WEFT_IB_HCA on both nodes";
          return false;
        }
        remote_ = remote;
        // The receiver answers with ECE only when it took the offer.
        if (remote.ece && options_.qp_settings.ece) {
          std::string why;
          if (!qps().set_ece(remote.ece_vendor_id, remote.ece_options, &why)) {
            WEFT_INFO(NCCL_NET, "%s: connection to %s without ECE: %s", port().name().c_str(),
                      peer_name().c_str(), why.c_str());
          }
        }
        for (int q = 0; q < qps().count(); ++q) {
          if (!qps().connect(q, remote.qpn[q], remote, options_.qp_settings, failure)) return false;
        }
        return true;
      });
  return true;
}

ConnectionInfo VerbsSendComm::local_info() const {
  auto& self = const_cast<VerbsSendComm&>(*this);
  const PortAddress& address = self.port().address();
  ConnectionInfo info;
  info.role = Role::Sender;
  info.link_layer = address.link_layer;
  info.qp_count = static_cast<uint8_t>(self.qps().count());
  info.mtu = address.active_mtu;
  info.lid = address.lid;
  info.listen_id = listen_id_;
  info.secret = listen_secret_;
  std::memcpy(info.gid, address.gid, 16);
  for (int q = 0; q < self.qps().count(); ++q) info.qpn[q] = self.qps().qp(q)->qp_num;
  info.fifo_address = reinterpret_cast<uint64_t>(control_->fifo);
  info.fifo_rkey = control_region_->rkey;
  info.split_data = options_.split_data;
  info.adaptive_routing = options_.adaptive_routing;
  info.ece =
      options_.qp_settings.ece && self.qps().query_ece(&info.ece_vendor_id, &info.ece_options);
  info.process = own_identity();
  info.link_key = own_link_key();
  return info;
}

SetupProgress VerbsSendComm::advance_setup(std::string* error) {
  if (set_up()) return SetupProgress::Done;
  SetupProgress progress = exchange_.advance(carrier(), error);
  if (progress == SetupProgress::Done) watch_peer(remote_.process, remote_.link_key);
  return progress;
}

ncclResult_t VerbsSendComm::isend(void* data, size_t size, int tag, void* mhandle,
                                  Request** request) {
  *request = nullptr;
  if (faulted()) return fault();
  auto* region = static_cast<MemoryHandle*>(mhandle);
  if (size > 0 && (region == nullptr || region->magic != MemoryHandle::kMagic)) {
    WEFT_WARN("%s: isend of %zu bytes with mhandle %p, which is not a weft verbs registration",
              port().name().c_str(), size, mhandle);
    return ncclInvalidArgument;
  }
  const int s = fifo_slot(sequence_);
  Slot& slot = slots_[static_cast<size_t>(s)];
  if (slot.count == 0) {
    int count = 0;
    std::string error;
    switch (check_cts_group(control_->fifo[s], sequence_, &count, &error)) {
      case CtsState::NotYet:
        return check_health(/*waiting=*/true);
      case CtsState::Invalid:
        if (invalid_cts_.settling(sequence_, InvalidCtsGrace::Clock::now()))
          return check_health(/*waiting=*/true);
        return fail(ncclRemoteError, error);
      case CtsState::Ready:
        break;
    }
    invalid_cts_.clear();
    slot.count = count;
    slot.taken = 0;
    slot.taken_mask = 0;
  }
  // Read in place, not copied: the receiver rewrites this FIFO slot only for
  // a receive it posts after this group's data arrived, and a peer that
  // rewrites it sooner only misdirects writes into its own memory.
  const volatile FifoEntry* entries = control_->fifo[s];
  int match = -1;
  for (int i = 0; i < slot.count && match < 0; ++i) {
    if ((slot.taken_mask & (1u << i)) == 0 && entries[i].tag == tag) {
      match = i;
    }
  }
  // Not this message's receive (yet): NCCL posts sends in the receives'
  // order, so this send waits for a later clear-to-send, as with NCCL's
  // own IB transport.
  if (match < 0) return check_health(/*waiting=*/true);
  VerbsRequest* req = acquire_request(1);
  if (req == nullptr) return ncclSuccess;  // NCCL tries again
  if (net_profiler_on()) begin_shares(*req);
  req->slot = s;
  req->pending = 1;
  req->posted[0] = size;
  req->sizes[0] = size;
  Item& item = slot.items[match];
  item.data = static_cast<const uint8_t*>(data);
  item.lkey = region != nullptr ? region->lkey : 0;
  item.request = req;
  const uint64_t posted = entries[match].size;
  item.truncated = size > posted;
  if (item.truncated) {
    WEFT_WARN(
        "%s: isend of %zu bytes to %s, whose receive was posted with %llu: message "
        "truncated, nothing sent",
        port().name().c_str(), size, peer_name().c_str(), static_cast<unsigned long long>(posted));
    req->result = ncclInvalidUsage;
  }
  slot.taken_mask |= 1u << match;
  ++slot.taken;
  *request = req;
  if (slot.taken < slot.count) return ncclSuccess;
  ncclResult_t result = post_group(s);
  ++sequence_;
  return result;
}

ncclResult_t VerbsSendComm::post_group(int s) {
  Slot& slot = slots_[static_cast<size_t>(s)];
  const volatile FifoEntry* entries = control_->fifo[s];
  const int qp_count = qps().count();
  const int sets = options_.split_data ? qp_count : 1;
  const int first = options_.split_data ? 0 : static_cast<int>(sequence_ % qp_count);
  const bool sizes_in_fifo = slot.count > 1 || slot.items[0].size() >= kImmSizesInFifo;
  size_t total = 0;
  for (int i = 0; i < slot.count; ++i) total += slot.items[i].truncated ? 0 : slot.items[i].size();
  const bool separate_imm = options_.adaptive_routing && total >= options_.ar_threshold;
  const uint32_t imm = htonl(immediate_for(slot.count, slot.items[0].size(), sequence_));
  const uint32_t inline_limit = options_.use_inline ? qps().capacity().inline_bytes : 0;
  const uint64_t sizes_remote =
      remote_.fifo_address + static_cast<uint64_t>(s) * kMaxRecvs * sizeof(uint64_t);

  const bool profiled = net_profiler_on();
  for (int k = 0; k < sets; ++k) {
    int n = 0;
    const int qp_index = (first + k) % qp_count;
    auto add = [&](void* local, size_t length, uint32_t lkey, uint64_t remote, uint32_t rkey,
                   bool may_inline) {
      ibv_send_wr& wr = wrs_[n];
      ibv_sge& sge = sges_[n];
      wr = ibv_send_wr{};
      sge.addr = reinterpret_cast<uint64_t>(local);
      sge.length = static_cast<uint32_t>(length);
      sge.lkey = lkey;
      wr.sg_list = &sge;
      wr.num_sge = length > 0 ? 1 : 0;
      wr.opcode = IBV_WR_RDMA_WRITE;
      wr.wr.rdma.remote_addr = remote;
      wr.wr.rdma.rkey = rkey;
      if (may_inline && length > 0 && length <= inline_limit) wr.send_flags = IBV_SEND_INLINE;
      if (n > 0) wrs_[n - 1].next = &wr;
      ++n;
    };
    // The sizes first: the write with immediate must come after them.
    if (k == 0 && sizes_in_fifo) {
      for (int i = 0; i < slot.count; ++i) control_->sizes[s][i] = slot.items[i].size();
      size_t length = static_cast<size_t>(slot.count) * sizeof(uint64_t);
      bool fits = length <= qps().capacity().inline_bytes;
      add(control_->sizes[s], length, control_region_->lkey, sizes_remote, remote_.fifo_rkey,
          false);
      if (fits) wrs_[n - 1].send_flags = IBV_SEND_INLINE;
    }
    int data_writes = 0;
    for (int i = 0; i < slot.count; ++i) {
      const Item& item = slot.items[i];
      if (item.truncated) continue;
      size_t offset = 0;
      size_t length = 0;
      chunk_of(item.size(), k, sets, &offset, &length);
      if (length == 0) continue;
      add(const_cast<uint8_t*>(item.data) + offset, length, item.lkey, entries[i].address + offset,
          entries[i].rkey, true);
      ++data_writes;
      if (profiled) [[unlikely]] {
        record_share(*item.request, qps().qp(qp_index)->qp_num, length);
      }
    }
    if (data_writes == 0 || separate_imm) {
      add(nullptr, 0, 0, sizes_remote, remote_.fifo_rkey, false);
    }
    ibv_send_wr& last = wrs_[n - 1];
    last.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
    last.imm_data = imm;
    last.send_flags |= IBV_SEND_SIGNALED;
    last.wr_id = wr_id(WrKind::Data, static_cast<uint32_t>(s));
    last.next = nullptr;
    ibv_send_wr* bad = nullptr;
    int rc = ibv_post_send(qps().qp(qp_index), wrs_, &bad);
    if (rc != 0) {
      return fail(ncclSystemError, "ibv_post_send on QP " + std::to_string(qp_index) +
                                       " failed: " + std::strerror(rc));
    }
    ++slot.pending;
  }
  return ncclSuccess;
}

void VerbsSendComm::on_completion(const ibv_wc& wc) {
  if (wr_kind(wc.wr_id) != WrKind::Data || wr_index(wc.wr_id) >= kFifoSlots) {
    fail(ncclInternalError, "completion with an unknown work request id");
    return;
  }
  Slot& slot = slots_[wr_index(wc.wr_id)];
  if (slot.pending <= 0) return;
  // This queue pair's share of each message is on the wire and acknowledged.
  for (int i = 0; i < slot.count; ++i) {
    if (slot.items[i].request->net_events) [[unlikely]] {
      share_done_on_lane(*slot.items[i].request, wc.qp_num);
    }
  }
  if (--slot.pending > 0) return;
  for (int i = 0; i < slot.count; ++i) slot.items[i].request->pending = 0;
  slot.count = 0;
}

}  // namespace weft::verbs
