#include "ofi/one_sided/rma_comm.h"

#include <rdma/fi_errno.h>

#include <cstring>
#include <memory>

#include "core/handle_header.h"
#include "core/rma_connect.h"
#include "ofi/endpoint/memory_region.h"
#include "ofi/endpoint/tag_layout.h"
#include "ofi/one_sided/rma_inbox.h"
#include "weft/log.h"

namespace weft::ofi {

ncclResult_t OfiRmaComm::connect(void* const* handles, int nranks, int rank,
                                 OfiRmaListenComm* listen, int timeout_ms,
                                 std::unique_ptr<OfiRmaComm>* out) {
  const bool message_signals = listen->message_signals;
  Endpoint& endpoint = *listen->endpoint;
  const std::string& device = endpoint.device_name();
  RmaHandleRules rules;
  rules.transport = TransportId::OfiRma;
  rules.fingerprint = listen->fingerprint;
  rules.fingerprint_mismatch =
      "another libfabric provider or address format; set the same WEFT_OFI_PROVIDER on every node";
  rules.check_payload = [&](int, const ListenHandle& handle, std::string* problem) {
    return endpoint.plausible_peer_address(handle.payload, handle.payload_size, problem);
  };
  rules.is_own = [&](const ListenHandle& handle) {
    return handle.listen_id == listen->id && handle.payload_size == endpoint.local_address_size() &&
           std::memcmp(handle.payload, endpoint.local_address(), handle.payload_size) == 0;
  };
  std::vector<ListenHandle> decoded_handles;
  if (ncclResult_t result =
          decode_rma_handles(handles, nranks, rank, device, rules, &decoded_handles);
      result != ncclSuccess) {
    return result;
  }
  std::unique_ptr<OfiRmaComm> comm(
      new OfiRmaComm(listen->endpoint, listen->id, rank, nranks, timeout_ms));
  comm->peers_ = std::make_unique<RmaPeer[]>(static_cast<size_t>(nranks));
  comm->set_rank_secrets(decoded_handles);
  comm->message_signals_ = message_signals;
  // Addresses go to the provider only once a rank is addressed.
  for (int r = 0; r < nranks; ++r) {
    const ListenHandle& decoded = decoded_handles[static_cast<size_t>(r)];
    RmaPeer& peer = comm->peers_[static_cast<size_t>(r)];
    peer.id = decoded.listen_id;
    peer.raw_address.assign(decoded.payload, decoded.payload + decoded.payload_size);
    peer.name = endpoint.address_to_string(decoded.payload, decoded.payload_size);
  }
  listen->handed_over = true;
  // Posted before NCCL has the comm: no rank addresses it before.
  comm->inbox_ = std::make_unique<RmaInbox>(*comm);
  if (ncclResult_t result = comm->inbox_->open(rma_signal_tag(comm->id_)); result != ncclSuccess) {
    return result;
  }
  WEFT_INFO(NCCL_NET, "%s: one-sided comm of %d ranks ready (rank %d); ranks are met on first use",
            device.c_str(), nranks, rank);
  *out = std::move(comm);
  return ncclSuccess;
}

OfiRmaComm::OfiRmaComm(std::shared_ptr<Endpoint> endpoint, uint32_t id, int rank, int nranks,
                       int timeout_ms)
    : SymmetricComm(rank, nranks, timeout_ms > 0 ? timeout_ms : 1),
      endpoint_(std::move(endpoint)),
      id_(id) {}

OfiRmaComm::~OfiRmaComm() {
  close_all();
  if (inbox_ && !inbox_->close()) {
    // The provider may still write into its slots: leave them be.
    WEFT_WARN("%s: one-sided receives would not cancel; their memory is kept",
              endpoint_->device_name().c_str());
    (void)inbox_.release();
    return;
  }
  inbox_.reset();
  endpoint_->release_id(id_);
}

fi_addr_t OfiRmaComm::peer_address(uint32_t rank, std::string* error) {
  RmaPeer& peer = peers_[rank];
  if (peer.inserted.load(std::memory_order_acquire)) return peer.address;
  std::lock_guard<std::mutex> lock(peers_mutex_);
  if (!peer.inserted.load(std::memory_order_relaxed)) {
    ncclResult_t result =
        endpoint_->insert_address(peer.raw_address.data(), peer.raw_address.size(), &peer.address);
    if (result != ncclSuccess) {
      *error = "the provider refused rank " + std::to_string(rank) + "'s address " + peer.name;
      return FI_ADDR_NOTAVAIL;
    }
    peer.inserted.store(true, std::memory_order_release);
  }
  return peer.address;
}

void OfiRmaComm::send_on_demand(uint32_t rank, const RmaRecord& record) {
  inbox_->send(rank, peers_[rank].id, record);
}

ncclResult_t OfiRmaComm::progress() {
  ncclResult_t result = endpoint_->poll();
  if (result == ncclSuccess) result = inbox_->service();
  expire_asks();
  return result;
}

ncclResult_t OfiRmaComm::register_local(void* data, size_t size, int type, int dmabuf_fd,
                                        uint64_t dmabuf_offset, void** local, void** descriptor,
                                        uint64_t* address, uint64_t* key) {
  MemorySource source;
  ncclResult_t result = classify_memory(*endpoint_, data, size, type, &source);
  if (result != ncclSuccess) return result;
  source.dmabuf_fd = dmabuf_fd;
  source.dmabuf_offset = dmabuf_offset;
  result = register_memory(*endpoint_, data, size, source, local);
  if (result != ncclSuccess) return result;
  const Registration& registration = static_cast<MemoryRegion*>(*local)->registration();
  *address = endpoint_->remote_address(data, registration);
  *key = registration.key;
  *descriptor = descriptor_of(*local);
  return ncclSuccess;
}

ncclResult_t OfiRmaComm::deregister_local(void* local) {
  return deregister_memory(endpoint_.get(), device_name(), local);
}

std::unique_ptr<RmaBlockBase> OfiRmaComm::make_block(const RmaContextConfig& config,
                                                     ncclResult_t* result) {
  auto block = std::make_unique<RmaBlock<OpContext>>(*this, *this, config);
  *result = block->open();
  return block;
}

OfiRmaComm::Posted OfiRmaComm::posted(ssize_t rc, const char* call, std::string* error) const {
  if (rc == 0) return Posted::Done;
  if (rc == -FI_EAGAIN) return Posted::Busy;
  *error = std::string(call) + ": " + fi_strerror(static_cast<int>(-rc));
  return Posted::Failed;
}

OfiRmaComm::Posted OfiRmaComm::write(uint32_t rank, uint8_t* local, size_t length, void* descriptor,
                                     uint64_t remote, uint64_t key, OpContext* op,
                                     std::string* error) {
  fi_addr_t address = peer_address(rank, error);
  if (address == FI_ADDR_NOTAVAIL) return Posted::Failed;
  return posted(endpoint_->rma_write(local, length, descriptor, address, remote, key, op),
                "fi_writemsg", error);
}

OfiRmaComm::Posted OfiRmaComm::read(uint32_t rank, uint8_t* local, size_t length, void* descriptor,
                                    uint64_t remote, uint64_t key, OpContext* op,
                                    std::string* error) {
  fi_addr_t address = peer_address(rank, error);
  if (address == FI_ADDR_NOTAVAIL) return Posted::Failed;
  return posted(endpoint_->rma_read(local, length, descriptor, address, remote, key, op), "fi_read",
                error);
}

OfiRmaComm::Posted OfiRmaComm::signal(uint32_t rank, uint64_t* operand, void* operand_descriptor,
                                      uint64_t remote, uint64_t key, OpContext* op,
                                      std::string* error) {
  fi_addr_t address = peer_address(rank, error);
  if (address == FI_ADDR_NOTAVAIL) return Posted::Failed;
  if (signals_by_message()) {
    return posted(endpoint_->send(operand, kRmaSignalSize, operand_descriptor, address,
                                  rma_signal_tag(peers_[rank].id), op),
                  "fi_tsend", error);
  }
  return posted(endpoint_->atomic_add(operand, operand_descriptor, address, remote, key, op),
                "fi_atomicmsg", error);
}

ncclResult_t OfiRmaComm::register_operands(void* data, size_t size, void** region,
                                           void** descriptor) {
  ncclResult_t result = register_memory(*endpoint_, data, size, MemorySource{}, region);
  *descriptor = result == ncclSuccess ? descriptor_of(*region) : nullptr;
  return result;
}

void OfiRmaComm::deregister_operands(void* region) {
  deregister_memory(endpoint_.get(), device_name(), region);
}

}  // namespace weft::ofi
