// What send and receive comms share: the endpoint, the peer, the rails,
// memory registration and the close protocol (finish or cancel what is in
// flight, or leave it to the endpoint). Messages go through the comm's
// data path (tagged_*_path, rdma_*_path).
#pragma once

#include <rdma/fabric.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "core/peer_links.h"
#include "ofi/endpoint/comm_close.h"
#include "ofi/endpoint/completion.h"
#include "ofi/endpoint/completion_failure.h"
#include "ofi/endpoint/endpoint.h"
#include "ofi/endpoint/memory_region.h"
#include "weft/log.h"

namespace weft::ofi {

// A rail beyond the first of a multi-rail comm: its own endpoint, and the
// peer's address on it (known to the sending side only).
struct RailLink {
  std::shared_ptr<Endpoint> endpoint;
  fi_addr_t peer = FI_ADDR_UNSPEC;
};

struct CommSetup {
  std::shared_ptr<Endpoint> endpoint;  // rail 0: connection setup, control, eager
  fi_addr_t peer = FI_ADDR_UNSPEC;
  std::string peer_name;
  int close_timeout_ms = 2000;
  std::vector<RailLink> extra_rails;  // rails 1.. of a multi-rail device
  size_t min_stripe = 131072;         // WEFT_MIN_STRIPE_SIZE
  std::shared_ptr<PeerLinks> links;   // liveness links; null: none
  // How long rail 0 may take to carry a probe while an rdma send waits for
  // its clear-to-send (rdma_send_path.h); zero: no probes. WEFT_PEER_TIMEOUT_MS.
  std::chrono::milliseconds rail_probe_deadline{0};
};

template <typename Interface>
class OfiDataComm : public Interface {
 public:
  explicit OfiDataComm(CommSetup setup)
      : setup_(std::move(setup)), device_name_(setup_.endpoint->device_name()) {}
  ~OfiDataComm() { deregister_memory(setup_.endpoint.get(), device_name_, control_region_); }

  // Registers the comm's control-message buffers (needed with FI_MR_LOCAL).
  ncclResult_t register_control(void* data, size_t size) {
    return register_memory(*setup_.endpoint, data, size, MemorySource{}, &control_region_);
  }
  void* control_descriptor() const { return descriptor_of(control_region_); }
  bool control_registered() const { return control_region_ != nullptr; }

  ncclResult_t reg_mr(void* data, size_t size, int type, void** mhandle) override {
    *mhandle = nullptr;
    MemorySource source;
    ncclResult_t result = classify_memory(*setup_.endpoint, data, size, type, &source);
    if (result != ncclSuccess) return result;
    return register_on_rails(data, size, source, mhandle);
  }
  ncclResult_t reg_mr_dmabuf(void* data, size_t size, int type, uint64_t offset, int fd,
                             void** mhandle) override {
    *mhandle = nullptr;
    MemorySource source;
    ncclResult_t result = classify_memory(*setup_.endpoint, data, size, type, &source);
    if (result != ncclSuccess) return result;
    if (fd >= 0 && type == NCCL_PTR_CUDA && setup_.endpoint->domain().dmabuf()) {
      // Used during the call only: NCCL closes the fd when it returns.
      source.dmabuf_fd = fd;
      source.dmabuf_offset = offset;
    }
    return register_on_rails(data, size, source, mhandle);
  }
  ncclResult_t dereg_mr(void* mhandle) override {
    auto* region = static_cast<MemoryRegion*>(mhandle);
    ncclResult_t result = ncclSuccess;
    if (region != nullptr && region->magic == MemoryRegion::kMagic) {
      for (size_t r = 0; r < setup_.extra_rails.size(); ++r) {
        ncclResult_t rail = deregister_memory(setup_.extra_rails[r].endpoint.get(), device_name_,
                                              region->rail_region[r + 1]);
        if (rail != ncclSuccess) result = rail;
      }
    }
    ncclResult_t first = deregister_memory(setup_.endpoint.get(), device_name_, mhandle);
    return first != ncclSuccess ? first : result;
  }
  void close() override { close_within(setup_.close_timeout_ms); }

  // Finishes or cancels what is in flight for up to `timeout_ms`, then
  // deletes the comm, or leaves it to the endpoint if operations remain.
  void close_within(int timeout_ms) {
    before_close(timeout_ms);
    cancel_receives();
    setup_.endpoint->release_id(local_id());
    // Held here: if the endpoint adopts this comm, the comm's own reference
    // to it must not be the last.
    std::shared_ptr<Endpoint> endpoint = setup_.endpoint;
    std::string peer = setup_.peer_name;
    RailPoller rails{this};
    if (!finish_close(
            this, rails, *endpoint, timeout_ms, [this] { return !in_flight(); },
            [this] { setup_.endpoint.reset(); })) {
      WEFT_INFO(NCCL_NET,
                "%s: closed a comm with peer %s while operations were still in flight; they are "
                "released when the endpoint closes",
                endpoint->device_name().c_str(), peer.c_str());
    }
  }

 protected:
  virtual bool in_flight() = 0;
  // The id this endpoint gave the comm, which its peer's messages name.
  virtual uint32_t local_id() const = 0;
  virtual void cancel_receives() {}
  // Runs first: what the comm must see from its peer before it stops
  // listening (at most `timeout_ms`).
  virtual void before_close(int timeout_ms) { (void)timeout_ms; }

  // Reads completions on every rail.
  ncclResult_t poll_rails() {
    ncclResult_t result = setup_.endpoint->poll();
    for (size_t r = 0; r < setup_.extra_rails.size() && result == ncclSuccess; ++r) {
      result = setup_.extra_rails[r].endpoint->poll();
    }
    return result;
  }
  int rail_count() const { return 1 + static_cast<int>(setup_.extra_rails.size()); }
  // Keeps the first `rails` rails: as many as both sides have.
  void keep_rails(int rails) { setup_.extra_rails.resize(static_cast<size_t>(rails - 1)); }
  Endpoint& rail_endpoint(int rail) {
    return rail == 0 ? *setup_.endpoint : *setup_.extra_rails[rail - 1].endpoint;
  }
  fi_addr_t rail_peer(int rail) const {
    return rail == 0 ? setup_.peer : setup_.extra_rails[rail - 1].peer;
  }
  void set_rail_peer(int rail, fi_addr_t peer) { setup_.extra_rails[rail - 1].peer = peer; }
  size_t min_stripe() const { return setup_.min_stripe; }
  std::chrono::milliseconds rail_probe_deadline() const { return setup_.rail_probe_deadline; }

  // This process's identity for the connection messages (token 0: none).
  PeerIdentity own_identity() const {
    return setup_.links ? setup_.links->identity() : PeerIdentity{};
  }
  // The comm's data path checks its peer through this (path_peer.h).
  PeerWatch* watch() { return &watch_; }
  // What proves a link hello to this process, for the connection messages
  // (0: no links).
  uint64_t own_link_key() const { return setup_.links ? setup_.links->link_key() : 0; }
  const std::shared_ptr<PeerLinks>& links() const { return setup_.links; }
  // The link to the peer's process (either side may have opened it; a
  // hello from this side presents the peer's `link_key`).
  void watch_peer(const PeerIdentity& peer, uint64_t link_key) {
    if (setup_.links)
      watch_.watch(setup_.links, setup_.links->link_to(peer, link_key, setup_.peer_name));
  }

  Endpoint& endpoint() { return *setup_.endpoint; }
  fi_addr_t peer() const { return setup_.peer; }
  const std::string& peer_name() const { return setup_.peer_name; }
  const std::string& device_name() const { return device_name_; }

 private:
  struct RailPoller final : Poller {
    explicit RailPoller(OfiDataComm* owner) : comm(owner) {}
    ncclResult_t poll() override { return comm->poll_rails(); }
    OfiDataComm* comm;
  };

  // Registers on rail 0 (the handle NCCL gets) and on every other rail.
  ncclResult_t register_on_rails(void* data, size_t size, const MemorySource& source,
                                 void** mhandle) {
    ncclResult_t result = register_memory(*setup_.endpoint, data, size, source, mhandle);
    if (result != ncclSuccess) return result;
    auto* region = static_cast<MemoryRegion*>(*mhandle);
    for (size_t r = 0; r < setup_.extra_rails.size(); ++r) {
      result = register_memory(*setup_.extra_rails[r].endpoint, data, size, source,
                               &region->rail_region[r + 1]);
      if (result != ncclSuccess) {
        dereg_mr(*mhandle);
        *mhandle = nullptr;
        return result;
      }
    }
    return ncclSuccess;
  }

  CommSetup setup_;
  std::string device_name_;
  void* control_region_ = nullptr;
  PeerWatch watch_;
};

}  // namespace weft::ofi
