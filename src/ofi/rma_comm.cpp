#include "ofi/rma_comm.h"

#include <rdma/fi_errno.h>

#include <chrono>
#include <cstring>
#include <memory>
#include <thread>

#include "core/handle_header.h"
#include "ofi/memory_region.h"
#include "ofi/rma_context.h"
#include "ofi/rma_signal_inbox.h"
#include "ofi/tag_layout.h"
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
  if (handles == nullptr || nranks < 1 || rank < 0 || rank >= nranks) {
    WEFT_WARN("one-sided connect on %s: rank %d of %d ranks%s", device.c_str(), rank, nranks,
              handles == nullptr ? " and no handles" : "");
    return ncclInvalidArgument;
  }
  std::unique_ptr<OfiRmaComm> comm(new OfiRmaComm(listen->endpoint, listen->id, rank, timeout_ms));
  comm->peers_.resize(static_cast<size_t>(nranks));
  std::vector<ListenHandle> decoded_handles(static_cast<size_t>(nranks));
  for (int r = 0; r < nranks; ++r) {
    ListenHandle decoded;
    std::string error;
    if (handles[r] == nullptr ||
        !decode_handle(handles[r], kHandleSize, TransportId::OfiRma, &decoded, &error)) {
      WEFT_WARN("one-sided connect on %s: the handle of rank %d is not usable: %s", device.c_str(),
                r, handles[r] == nullptr ? "it is NULL" : error.c_str());
      return ncclInvalidArgument;
    }
    if (decoded.fingerprint != listen->fingerprint) {
      WEFT_WARN(
          "one-sided connect on %s: rank %d listens with another libfabric provider or "
          "address format; set the same WEFT_OFI_PROVIDER on every node",
          device.c_str(), r);
      return ncclInvalidUsage;
    }
    std::string problem;
    if (!endpoint.plausible_peer_address(decoded.payload, decoded.payload_size, &problem)) {
      WEFT_WARN("one-sided connect on %s: rank %d's address: %s", device.c_str(), r,
                problem.c_str());
      return ncclInvalidArgument;
    }
    bool mine = decoded.listen_id == listen->id &&
                decoded.payload_size == endpoint.local_address_size() &&
                std::memcmp(decoded.payload, endpoint.local_address(), decoded.payload_size) == 0;
    if ((r == rank) != mine) {
      WEFT_WARN("one-sided connect on %s: %s", device.c_str(),
                r == rank ? "this rank's own handle is not the one its listen made (handles out "
                            "of rank order?)"
                          : "another rank's handle is this rank's own listen handle");
      return ncclInvalidArgument;
    }
    decoded_handles[static_cast<size_t>(r)] = decoded;
  }
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
  result = comm->exchange(hello, &all, "connect");
  if (result != ncclSuccess) return result;
  WEFT_INFO(NCCL_NET, "%s: one-sided comm of %d ranks connected (rank %d)", device.c_str(), nranks,
            rank);
  *out = std::move(comm);
  return ncclSuccess;
}

OfiRmaComm::OfiRmaComm(std::shared_ptr<Endpoint> endpoint, uint32_t id, int rank, int timeout_ms)
    : endpoint_(std::move(endpoint)), id_(id), rank_(rank), timeout_ms_(timeout_ms) {}

OfiRmaComm::~OfiRmaComm() {
  while (!contexts_.empty()) destroy_context(contexts_.back().get());
  if (!regions_.empty()) {
    WEFT_INFO(NCCL_NET, "%s: one-sided comm closed with %zu regions still registered: released",
              endpoint_->device_name().c_str(), regions_.size());
    while (!regions_.empty()) dereg_mr_sym(*regions_.begin());
  }
  if (inbox_ && !inbox_->close()) {
    WEFT_WARN("%s: receives for signal messages would not cancel; their memory is kept",
              endpoint_->device_name().c_str());
    inbox_.release();
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

ncclResult_t OfiRmaComm::exchange(const RmaRecord& mine, std::vector<RmaRecord>* all,
                                  const char* what) {
  const int nranks = rank_count();
  all->assign(static_cast<size_t>(nranks), mine);
  (*all)[static_cast<size_t>(rank_)].rank = static_cast<uint32_t>(rank_);
  if (nranks == 1) return ncclSuccess;
  const uint32_t round = round_++;
  RmaRecord expected = mine;
  expected.rank = static_cast<uint32_t>(rank_);
  expected.ranks = static_cast<uint32_t>(nranks);
  expected.round = round;
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
  while (result == ncclSuccess && (received < peers || sent < peers)) {
    result = endpoint_->poll();
    if (result != ncclSuccess) break;
    for (int i = 0; i < peers && result == ncclSuccess; ++i) {
      if (seen[static_cast<size_t>(i)]) continue;
      int state = ops->state(i);
      if (state == ExchangeRound::kPending) continue;
      seen[static_cast<size_t>(i)] = true;
      ++received;
      if (state != 0) {
        WEFT_WARN("one-sided %s on %s: receiving a setup message failed: %s", what,
                  device_name().c_str(), fi_strerror(state));
        result = ncclRemoteError;
        break;
      }
      RmaRecord record;
      std::string error;
      const uint8_t* bytes = records_.data() + kRmaRecordSize * static_cast<size_t>(slot_of(i));
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
      std::string missing;
      for (int r = 0; r < nranks; ++r) {
        if (heard[static_cast<size_t>(r)]) continue;
        missing += (missing.empty() ? "" : ", ") + std::to_string(r) + " (" +
                   peers_[static_cast<size_t>(r)].name + ")";
      }
      WEFT_WARN(
          "one-sided %s on %s: rank %d heard nothing within %d ms (WEFT_CONNECT_TIMEOUT_MS) "
          "from rank%s %s; are they running, and do they call it too?",
          what, device_name().c_str(), rank_, timeout_ms_,
          missing.find(',') == std::string::npos ? "" : "s",
          missing.empty() ? "(all answered; sends unfinished)" : missing.c_str());
      result = ncclRemoteError;
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
  while (outstanding() && std::chrono::steady_clock::now() < give_up) {
    if (endpoint_->poll() != ncclSuccess) break;
    std::this_thread::yield();
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

bool OfiRmaComm::apply_signal(const RmaSignal& signal) {
  std::lock_guard<std::mutex> lock(regions_mutex_);
  for (OfiRmaRegion* region : regions_) {
    if (region->id != signal.region) continue;
    if (signal.offset > region->size || region->size - signal.offset < 8) {
      WEFT_WARN("%s: rank %u signals offset %llu of a %zu-byte region", device_name().c_str(),
                signal.sender, static_cast<unsigned long long>(signal.offset), region->size);
      return false;
    }
    if (region->type != NCCL_PTR_HOST) {
      WEFT_WARN(
          "%s: rank %u signals GPU memory, which weft can add to only with the "
          "provider's remote atomics (provider %s has none)",
          device_name().c_str(), signal.sender, endpoint_->provider_name().c_str());
      return false;
    }
    auto* word = reinterpret_cast<uint64_t*>(region->base + signal.offset);
    __atomic_fetch_add(word, signal.value, __ATOMIC_RELEASE);
    return true;
  }
  WEFT_WARN("%s: rank %u signals region %u, which this rank does not hold (deregistered?)",
            device_name().c_str(), signal.sender, signal.region);
  return false;
}

const OfiRmaRegion* OfiRmaComm::region_of(void* mhandle, const char* what) const {
  auto* region = static_cast<const OfiRmaRegion*>(mhandle);
  if (region == nullptr || region->magic != OfiRmaRegion::kMagic || region->comm != this) {
    WEFT_WARN("%s: %p is not a region registered on this one-sided comm", what, mhandle);
    return nullptr;
  }
  return region;
}

ncclResult_t OfiRmaComm::reg_mr_sym(void* data, size_t size, int type, uint64_t, void** mhandle) {
  return register_symmetric(data, size, type, -1, 0, mhandle);
}

ncclResult_t OfiRmaComm::reg_mr_sym_dmabuf(void* data, size_t size, int type, uint64_t offset,
                                           int fd, uint64_t, void** mhandle) {
  if (fd < 0) {
    WEFT_WARN("regMrSymDmaBuf on %s: no dma-buf fd (%d)", device_name().c_str(), fd);
    return ncclInvalidArgument;
  }
  return register_symmetric(data, size, type, fd, offset, mhandle);
}

ncclResult_t OfiRmaComm::register_symmetric(void* data, size_t size, int type, int fd,
                                            uint64_t offset, void** mhandle) {
  *mhandle = nullptr;
  if (data == nullptr || size == 0) {
    WEFT_WARN("regMrSym on %s: %zu bytes at %p: nothing to register", device_name().c_str(), size,
              data);
    return ncclInvalidArgument;
  }
  // Every rank calls this in turn: a failure here must still take part in
  // the exchange, or the others would wait for this rank until they time out.
  MemorySource source;
  ncclResult_t local_result = classify_memory(*endpoint_, data, size, type, &source);
  if (local_result == ncclSuccess) {
    source.dmabuf_fd = fd;
    source.dmabuf_offset = offset;
  }
  void* local = nullptr;
  if (local_result == ncclSuccess) {
    local_result = register_memory(*endpoint_, data, size, source, &local);
  }
  RmaRecord mine;
  mine.kind = RmaRecordKind::Window;
  if (local_result == ncclSuccess) {
    const Registration& registration = static_cast<MemoryRegion*>(local)->registration();
    mine.address = endpoint_->remote_address(data, registration);
    mine.key = registration.key;
    mine.size = size;
  }
  // Known to apply_signal before the exchange: a rank that finishes it
  // first may signal this region while this rank still waits in it.
  auto region = std::make_unique<OfiRmaRegion>();
  region->id = round_;  // the step exchange() takes: the same on every rank
  region->type = type;
  region->comm = this;
  region->base = static_cast<uint8_t*>(data);
  region->size = size;
  region->local = local;
  region->descriptor = descriptor_of(local);
  if (local_result == ncclSuccess) {
    std::lock_guard<std::mutex> lock(regions_mutex_);
    regions_.insert(region.get());
  }
  std::vector<RmaRecord> all;
  ncclResult_t result = exchange(mine, &all, "regMrSym");
  if (result == ncclSuccess && local_result != ncclSuccess) result = local_result;
  if (result == ncclSuccess) {
    for (size_t r = 0; r < all.size(); ++r) {
      if (all[r].size != 0) continue;
      WEFT_WARN("regMrSym on %s: rank %zu could not register its copy (see its log)",
                device_name().c_str(), r);
      result = ncclRemoteError;
      break;
    }
  }
  if (result != ncclSuccess) {
    {
      std::lock_guard<std::mutex> lock(regions_mutex_);
      regions_.erase(region.get());
    }
    if (local != nullptr) deregister_memory(endpoint_.get(), device_name(), local);
    return result;
  }
  region->windows.resize(all.size());
  for (size_t r = 0; r < all.size(); ++r) {
    region->windows[r] = RmaWindow{all[r].address, all[r].key, all[r].size};
  }
  *mhandle = region.release();
  return ncclSuccess;
}

ncclResult_t OfiRmaComm::dereg_mr_sym(void* mhandle) {
  const OfiRmaRegion* region = region_of(mhandle, "deregMrSym");
  if (region == nullptr) return ncclInvalidArgument;
  std::unique_ptr<OfiRmaRegion> owned(const_cast<OfiRmaRegion*>(region));
  {
    std::lock_guard<std::mutex> lock(regions_mutex_);
    regions_.erase(owned.get());
  }
  owned->magic = 0;
  return deregister_memory(endpoint_.get(), device_name(), owned->local);
}

ncclResult_t OfiRmaComm::create_context(const RmaContextConfig& config, RmaContext** context) {
  *context = nullptr;
  if (config.contexts < 1 || config.contexts > 1024) {
    WEFT_WARN("createContext on %s: %d contexts in one block, weft takes 1..1024",
              device_name().c_str(), config.contexts);
    return ncclInvalidArgument;
  }
  if (config.rank_stride < 1 || rank_count() % config.rank_stride != 0) {
    WEFT_WARN("createContext on %s: rank stride %d does not divide %d ranks", device_name().c_str(),
              config.rank_stride, rank_count());
    return ncclInvalidArgument;
  }
  auto made = std::make_unique<OfiRmaContext>(*this, config);
  if (ncclResult_t result = made->open(); result != ncclSuccess) return result;
  contexts_.push_back(std::move(made));
  *context = contexts_.back().get();
  return ncclSuccess;
}

ncclResult_t OfiRmaComm::destroy_context(RmaContext* context) {
  for (auto it = contexts_.begin(); it != contexts_.end(); ++it) {
    if (it->get() != context) continue;
    if (context == default_context_) default_context_ = nullptr;
    auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while ((*it)->busy() && std::chrono::steady_clock::now() < give_up) {
      if ((*it)->progress() != ncclSuccess) break;
    }
    if ((*it)->busy()) {
      // The provider may still complete into its requests.
      WEFT_WARN("destroyContext on %s: operations still in flight after 5 s; their memory is kept",
                device_name().c_str());
      it->release();
    }
    contexts_.erase(it);
    return ncclSuccess;
  }
  WEFT_WARN("destroyContext on %s: %p is not a context of this comm", device_name().c_str(),
            static_cast<void*>(context));
  return ncclInvalidArgument;
}

ncclResult_t OfiRmaComm::default_context(RmaContext** context) {
  if (default_context_ == nullptr) {
    RmaContext* made = nullptr;
    if (ncclResult_t result = create_context(RmaContextConfig{}, &made); result != ncclSuccess) {
      return result;
    }
    default_context_ = static_cast<OfiRmaContext*>(made);
  }
  *context = default_context_;
  return ncclSuccess;
}

}  // namespace weft::ofi
