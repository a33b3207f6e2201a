#include "ofi/one_sided/rma_comm.h"

#include <rdma/fi_errno.h>

#include <chrono>
#include <cstring>
#include <memory>

#include "core/handle_header.h"
#include "core/idle_backoff.h"
#include "core/listen_secret.h"
#include "core/rma_connect.h"
#include "ofi/endpoint/memory_region.h"
#include "ofi/endpoint/tag_layout.h"
#include "ofi/one_sided/rma_signal_inbox.h"
#include "weft/log.h"

namespace weft::ofi {
namespace {

// Setup records of one collective step, to the comm with `id`.
constexpr uint64_t rma_setup_tag(uint32_t id, uint32_t round) {
  return kControlBit | kRmaSetupKind | (static_cast<uint64_t>(round & kRmaRoundMask) << 32) | id;
}

// Completions of one collective step's sends and receives, which any thread
// polling the endpoint may deliver.
class ExchangeRound final : public CompletionTarget {
 public:
  explicit ExchangeRound(int operations)
      : ops_(new OpContext[operations]), state_(new std::atomic<int>[operations]) {
    for (int i = 0; i < operations; ++i) {
      ops_[i].target = this;
      ops_[i].slot = static_cast<uint32_t>(i);
      state_[i].store(kPending, std::memory_order_relaxed);
    }
  }
  static constexpr int kPending = 1;
  OpContext* op(int i) { return &ops_[i]; }
  // Before operation i is posted again.
  void rearm(int i) { state_[i].store(kPending, std::memory_order_release); }
  // kPending, 0 when done, or a positive error.
  int state(int i) const { return state_[i].load(std::memory_order_acquire); }
  void on_complete(uint32_t slot, size_t, const uint64_t*) override {
    state_[slot].store(0, std::memory_order_release);
  }
  void on_error(uint32_t slot, int error, size_t, const char*) override {
    state_[slot].store(error == 0 ? FI_EIO : error, std::memory_order_release);
  }

 private:
  std::unique_ptr<OpContext[]> ops_;
  std::unique_ptr<std::atomic<int>[]> state_;
};

}  // namespace

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
  comm->peers_.resize(static_cast<size_t>(nranks));
  comm->set_rank_secrets(decoded_handles);
  // Only once every handle passed: a bad one is the caller's error, not the
  // network's.
  for (int r = 0; r < nranks; ++r) {
    const ListenHandle& decoded = decoded_handles[static_cast<size_t>(r)];
    RmaPeer& peer = comm->peers_[static_cast<size_t>(r)];
    peer.id = decoded.listen_id;
    peer.name = endpoint.address_to_string(decoded.payload, decoded.payload_size);
    ncclResult_t result =
        endpoint.insert_address(decoded.payload, decoded.payload_size, &peer.address);
    if (result != ncclSuccess) return result;
  }
  listen->handed_over = true;
  comm->records_.assign(kRmaRecordSize * static_cast<size_t>(nranks), 0);
  MemorySource host;
  ncclResult_t result = register_memory(endpoint, comm->records_.data(), comm->records_.size(),
                                        host, &comm->records_region_);
  if (result != ncclSuccess) return result;
  if (message_signals) {
    // Posted before the hello: no peer signals before it has heard from all.
    comm->inbox_ = std::make_unique<RmaSignalInbox>(*comm);
    result = comm->inbox_->open(rma_signal_tag(comm->id_));
    if (result != ncclSuccess) return result;
  }
  RmaRecord hello;
  hello.kind = RmaRecordKind::Hello;
  std::vector<RmaRecord> all;
  result = comm->exchange(hello, comm->take_round(), &all, "connect");
  if (result != ncclSuccess) return result;
  WEFT_INFO(NCCL_NET, "%s: one-sided comm of %d ranks connected (rank %d)", device.c_str(), nranks,
            rank);
  *out = std::move(comm);
  return ncclSuccess;
}

OfiRmaComm::OfiRmaComm(std::shared_ptr<Endpoint> endpoint, uint32_t id, int rank, int nranks,
                       int timeout_ms)
    : SymmetricComm(rank, nranks),
      endpoint_(std::move(endpoint)),
      id_(id),
      timeout_ms_(timeout_ms) {}

OfiRmaComm::~OfiRmaComm() {
  close_all();
  if (inbox_ && !inbox_->close()) {
    WEFT_WARN("%s: receives for signal messages would not cancel; their memory is kept",
              endpoint_->device_name().c_str());
    (void)inbox_.release();
  }
  inbox_.reset();
  if (exchange_stuck_) {
    // A provider may still write into the records: leave them be.
    new std::vector<uint8_t>(std::move(records_));
    return;
  }
  if (records_region_ != nullptr) {
    deregister_memory(endpoint_.get(), endpoint_->device_name(), records_region_);
  }
  endpoint_->release_id(id_);
}

ncclResult_t OfiRmaComm::exchange(const RmaRecord& mine, uint32_t round,
                                  std::vector<RmaRecord>* all, const char* what) {
  const int nranks = rank_count();
  const int rank_ = rank();
  all->assign(static_cast<size_t>(nranks), mine);
  (*all)[static_cast<size_t>(rank_)].rank = static_cast<uint32_t>(rank_);
  if (nranks == 1) return ncclSuccess;
  RmaRecord expected = mine;
  expected.rank = static_cast<uint32_t>(rank_);
  expected.ranks = static_cast<uint32_t>(nranks);
  expected.round = round;
  expected.proof = own_proof();
  uint8_t* own = records_.data() + kRmaRecordSize * static_cast<size_t>(rank_);
  encode_rma_record(expected, own);
  void* descriptor = descriptor_of(records_region_);

  // Receives 0..n-2 into every slot but this rank's, then sends n-1..2n-3.
  const int peers = nranks - 1;
  // On the heap: if the provider will not let go of them, they are kept.
  auto ops = std::make_unique<ExchangeRound>(2 * peers);
  auto slot_of = [&](int receive) { return receive < rank_ ? receive : receive + 1; };
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms_);
  auto post = [&](auto&& call) {
    for (;;) {
      ssize_t rc = call();
      if (rc != -FI_EAGAIN) return rc;
      if (ncclResult_t result = endpoint_->poll(); result != ncclSuccess) return ssize_t{-FI_EIO};
      if (std::chrono::steady_clock::now() > deadline) return rc;
    }
  };
  int posted_receives = 0;
  int posted_sends = 0;
  ssize_t rc = 0;
  for (int i = 0; i < peers && rc == 0; ++i) {
    uint8_t* slot = records_.data() + kRmaRecordSize * static_cast<size_t>(slot_of(i));
    rc = post([&] {
      return endpoint_->receive(slot, kRmaRecordSize, descriptor, rma_setup_tag(id_, round),
                                ops->op(i));
    });
    if (rc == 0) ++posted_receives;
  }
  for (int r = 0; r < nranks && rc == 0; ++r) {
    if (r == rank_) continue;
    const RmaPeer& peer = peers_[static_cast<size_t>(r)];
    int op = peers + posted_sends;
    rc = post([&] {
      return endpoint_->send(own, kRmaRecordSize, descriptor, peer.address,
                             rma_setup_tag(peer.id, round), ops->op(op));
    });
    if (rc == 0) ++posted_sends;
  }

  std::vector<bool> heard(static_cast<size_t>(nranks), false);
  heard[static_cast<size_t>(rank_)] = true;
  std::vector<bool> seen(static_cast<size_t>(peers), false);
  ncclResult_t result = ncclSuccess;
  if (rc != 0) {
    WEFT_WARN("one-sided %s on %s: posting a setup message failed: %s", what, device_name().c_str(),
              fi_strerror(static_cast<int>(-rc)));
    result = ncclSystemError;
  }
  int received = 0;
  int sent = 0;
  // A blocking step: every rank waits for the slowest to arrive.
  IdleBackoff backoff;
  while (result == ncclSuccess && (received < peers || sent < peers)) {
    const int done_before = received + sent;
    result = endpoint_->poll();
    if (result != ncclSuccess) break;
    for (int i = 0; i < peers && result == ncclSuccess; ++i) {
      if (seen[static_cast<size_t>(i)]) continue;
      int state = ops->state(i);
      if (state == ExchangeRound::kPending) continue;
      if (state != 0) {
        WEFT_WARN("one-sided %s on %s: receiving a setup message failed: %s", what,
                  device_name().c_str(), fi_strerror(state));
        result = ncclRemoteError;
        break;
      }
      uint8_t* bytes = records_.data() + kRmaRecordSize * static_cast<size_t>(slot_of(i));
      if (!rma_record_proven(bytes, kRmaRecordSize, rank_secrets())) {
        // Not from a rank of this comm (whoever sent it was handed no
        // handle of it): dropped, and the receive posted again. A rank of
        // another weft version lands here too: say so.
        RmaRecord ignored;
        std::string problem;
        const bool weft_record = decode_rma_record(
            bytes, kRmaRecordSize, expected, static_cast<uint32_t>(rank_), &ignored, &problem);
        log_refused_connect("one-sided comm " + std::to_string(id_) + " on " + device_name(),
                            "a sender on the fabric",
                            "its setup message proved no rank's listen secret" +
                                (weft_record ? std::string() : " (" + problem + ")"));
        ops->rearm(i);
        ssize_t again = post([&] {
          return endpoint_->receive(bytes, kRmaRecordSize, descriptor, rma_setup_tag(id_, round),
                                    ops->op(i));
        });
        if (again != 0) {
          WEFT_WARN("one-sided %s on %s: posting a setup receive again failed: %s", what,
                    device_name().c_str(), fi_strerror(static_cast<int>(-again)));
          result = ncclSystemError;
        }
        continue;
      }
      seen[static_cast<size_t>(i)] = true;
      ++received;
      RmaRecord record;
      std::string error;
      if (!decode_rma_record(bytes, kRmaRecordSize, expected, static_cast<uint32_t>(rank_), &record,
                             &error)) {
        WEFT_WARN("one-sided %s on %s: a peer's setup message is refused: %s", what,
                  device_name().c_str(), error.c_str());
        result = ncclRemoteError;
        break;
      }
      if (heard[record.rank]) {
        WEFT_WARN("one-sided %s on %s: rank %u answered twice in one step", what,
                  device_name().c_str(), record.rank);
        result = ncclRemoteError;
        break;
      }
      heard[record.rank] = true;
      (*all)[record.rank] = record;
    }
    sent = 0;
    for (int s = 0; s < peers && result == ncclSuccess; ++s) {
      int state = ops->state(peers + s);
      if (state == ExchangeRound::kPending) continue;
      if (state != 0) {
        WEFT_WARN("one-sided %s on %s: sending a setup message failed: %s", what,
                  device_name().c_str(), fi_strerror(state));
        result = ncclRemoteError;
      }
      ++sent;
    }
    if (result == ncclSuccess && (received < peers || sent < peers) &&
        std::chrono::steady_clock::now() > deadline) {
      std::vector<std::string> names;
      for (const RmaPeer& peer : peers_) names.push_back(peer.name);
      warn_unheard(what, device_name(), rank_, timeout_ms_, unheard_ranks(heard, names));
      result = ncclRemoteError;
    }
    if (received + sent > done_before) {
      backoff.reset();
    } else {
      backoff.pause();
    }
  }
  if (result == ncclSuccess) return result;

  // Cancel what is still posted and wait a moment for the provider to let go.
  for (int i = 0; i < posted_receives; ++i) {
    if (ops->state(i) == ExchangeRound::kPending) endpoint_->cancel(ops->op(i));
  }
  auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(1);
  auto outstanding = [&] {
    for (int i = 0; i < posted_receives; ++i)
      if (ops->state(i) == ExchangeRound::kPending) return true;
    for (int s = 0; s < posted_sends; ++s)
      if (ops->state(peers + s) == ExchangeRound::kPending) return true;
    return false;
  };
  IdleBackoff settle;
  while (outstanding() && std::chrono::steady_clock::now() < give_up) {
    if (endpoint_->poll() != ncclSuccess) break;
    settle.pause();
  }
  if (outstanding()) {
    // The provider still holds pointers into ops and records: keep both.
    exchange_stuck_ = true;
    ops.release();
  }
  return result;
}

ncclResult_t OfiRmaComm::progress() {
  ncclResult_t result = endpoint_->poll();
  if (result == ncclSuccess && inbox_) result = inbox_->repost();
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
  return posted(
      endpoint_->rma_write(local, length, descriptor, peers_[rank].address, remote, key, op),
      "fi_writemsg", error);
}

OfiRmaComm::Posted OfiRmaComm::read(uint32_t rank, uint8_t* local, size_t length, void* descriptor,
                                    uint64_t remote, uint64_t key, OpContext* op,
                                    std::string* error) {
  return posted(
      endpoint_->rma_read(local, length, descriptor, peers_[rank].address, remote, key, op),
      "fi_read", error);
}

OfiRmaComm::Posted OfiRmaComm::signal(uint32_t rank, uint64_t* operand, void* operand_descriptor,
                                      uint64_t remote, uint64_t key, OpContext* op,
                                      std::string* error) {
  const RmaPeer& peer = peers_[rank];
  if (signals_by_message()) {
    return posted(endpoint_->send(operand, kRmaSignalSize, operand_descriptor, peer.address,
                                  rma_signal_tag(peer.id), op),
                  "fi_tsend", error);
  }
  return posted(endpoint_->atomic_add(operand, operand_descriptor, peer.address, remote, key, op),
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
