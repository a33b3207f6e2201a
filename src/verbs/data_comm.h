// What the verbs send and receive comms share: the port, the queue pairs,
// how a vanished peer is noticed (the liveness link to its process, shared
// by every comm with it, or without links the comm's own side channel,
// kept open), memory registration, requests, and the connection's failure
// state (the first failure ends the connection; every later call reports
// it).
#pragma once

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

#include "core/connection_fault.h"
#include "core/peer_links.h"
#include "core/request_pool.h"
#include "core/tcp_channel.h"
#include "verbs/open_port.h"
#include "verbs/polled_request.h"
#include "verbs/queue_pairs.h"
#include "verbs/setup_exchange.h"
#include "weft/log.h"

namespace weft::verbs {

// Completions come from the connection's own queue, polled by its thread.
using VerbsRequest = PolledRequest<kMaxRecvs>;

// wr_id: what a completion is for.
enum class WrKind : uint64_t { Data = 1, Cts = 2, Flush = 3 };
constexpr uint64_t wr_id(WrKind kind, uint32_t index) {
  return (static_cast<uint64_t>(kind) << 32) | index;
}
constexpr WrKind wr_kind(uint64_t id) {
  return static_cast<WrKind>(id >> 32);
}
constexpr uint32_t wr_index(uint64_t id) {
  return static_cast<uint32_t>(id);
}

struct ConnectionSetup {
  std::shared_ptr<OpenPort> port;
  QueuePairs qps;
  TcpStream stream;
  std::shared_ptr<PeerLinks> links;  // liveness links; null: none (the stream stays open)
  // Set up over the link to the peer's process, first to its mailbox
  // `peer_mailbox`; null: over `stream`.
  std::shared_ptr<PeerLink> link;
  uint32_t peer_mailbox = 0;
  std::string peer_name;
  // Keepalive on the side channel: a peer host that vanishes (no FIN, no
  // RST) fails it like a peer that exits. 0: none.
  int peer_timeout_ms = 0;
};

template <typename Interface>
class VerbsDataComm : public Interface, public RequestOwner {
 public:
  explicit VerbsDataComm(ConnectionSetup setup)
      : setup_(std::move(setup)), port_failures_(setup_.port->failures()) {
    if (setup_.link) {
      carrier_ = std::make_unique<LinkCarrier>(setup_.links, setup_.link, setup_.peer_mailbox);
    } else {
      carrier_ = std::make_unique<StreamCarrier>(setup_.stream);
    }
  }

  ncclResult_t reg_mr(void* data, size_t size, int type, void** mhandle) override {
    return port().register_memory(data, size, type, -1, 0,
                                  reinterpret_cast<MemoryHandle**>(mhandle));
  }
  ncclResult_t reg_mr_dmabuf(void* data, size_t size, int type, uint64_t offset, int fd,
                             void** mhandle) override {
    return port().register_memory(data, size, type, fd, offset,
                                  reinterpret_cast<MemoryHandle**>(mhandle));
  }
  ncclResult_t dereg_mr(void* mhandle) override {
    return port().deregister_memory(static_cast<MemoryHandle*>(mhandle));
  }

  void recycle(Request* request) override { release(static_cast<VerbsRequest*>(request)); }

  // The peer's side-channel address, for messages.
  const std::string& peer_name() const { return setup_.peer_name; }
  // This process's liveness identity for the connection info (token 0: none).
  PeerIdentity own_identity() const {
    return setup_.links ? setup_.links->identity() : PeerIdentity{};
  }
  // What proves a link hello to this process, for the connection info.
  uint64_t own_link_key() const { return setup_.links ? setup_.links->link_key() : 0; }
  // Once connected: with a link to the peer's process to watch, the side
  // channel closes (no fd per comm); else it stays open to be watched. A
  // link this side opens presents the peer's `link_key`.
  void watch_peer(const PeerIdentity& peer, uint64_t link_key) {
    carrier_.reset();  // its mailbox closes; the stream is decided below
    if (watching_) return;
    std::shared_ptr<PeerLink> link = setup_.link;
    if (!link && setup_.links && peer.token != 0)
      link = setup_.links->link_to(peer, link_key, setup_.peer_name);
    if (link) {
      watch_.watch(setup_.links, std::move(link));
      watching_ = true;
      setup_.stream = TcpStream{};
      return;
    }
    // Kept and watched: keepalive makes a vanished host fail it like a
    // peer that exits (set only here: a stream that closes needs none).
    std::string problem;
    if (setup_.peer_timeout_ms > 0 && setup_.stream.valid() &&
        !setup_.stream.keep_alive(setup_.peer_timeout_ms, &problem)) {
      WEFT_INFO(NCCL_NET, "%s", problem.c_str());
    }
  }

 protected:
  OpenPort& port() { return *setup_.port; }
  QueuePairs& qps() { return setup_.qps; }
  // What carries the connection setup, until watch_peer.
  ExchangeCarrier& carrier() { return *carrier_; }
  bool set_up() const { return carrier_ == nullptr; }
  bool faulted() const { return fault_.raised(); }
  ncclResult_t fault() const { return fault_.result(); }

  // Page-aligned, zeroed memory the peer writes into (FIFOs), registered;
  // freed by release_control. False with *error naming `what`.
  template <typename Control>
  bool allocate_control(Control** control, MemoryHandle** region, const char* what,
                        std::string* error) {
    *control = static_cast<Control*>(std::aligned_alloc(4096, (sizeof(Control) + 4095) & ~4095ul));
    if (*control == nullptr) {
      *error = std::string("out of memory for the ") + what;
      return false;
    }
    std::memset(*control, 0, sizeof(Control));
    if (port().register_memory(*control, sizeof(Control), NCCL_PTR_HOST, -1, 0, region) !=
        ncclSuccess) {
      *error = std::string("cannot register the ") + what;
      return false;
    }
    return true;
  }
  // The queue pairs go first: nothing may write into the memory once it is gone.
  template <typename Control>
  void release_control(Control* control, MemoryHandle* region) {
    setup_.qps.reset();
    if (region != nullptr) port().deregister_memory(region);
    std::free(control);
  }

  VerbsRequest* acquire_request(int count) {
    VerbsRequest* request = pool_.acquire();
    if (request != nullptr) request->start(this, count);
    return request;
  }
  void release(VerbsRequest* request) {
    release_slot(request);
    pool_.release(request);
  }
  size_t requests_in_flight() const { return pool_.in_use(); }

  // Ends the connection: every pending and later operation reports `result`.
  ncclResult_t fail(ncclResult_t result, const std::string& text) {
    return fault_.raise(result, port().name(), peer_name(), text);
  }

  // Reads completions; failures end the connection.
  ncclResult_t poll_cq(ibv_cq* cq) {
    if (faulted()) return fault();
    ibv_wc completions[16];
    int n = ibv_poll_cq(cq, 16, completions);
    if (n < 0) return fail(ncclSystemError, "ibv_poll_cq failed");
    for (int i = 0; i < n; ++i) {
      const ibv_wc& wc = completions[i];
      if (wc.status != IBV_WC_SUCCESS) {
        if (!faulted()) fail(status_result(wc.status), describe_failure(wc));
        continue;
      }
      on_completion(wc);
      if (faulted()) return fault();
    }
    return n == 0 ? check_health() : ncclSuccess;
  }

  // Rate-limited checks while idle: the port's fatal events, and the peer
  // process (its side channel closes when it exits or closes the comm).
  // `waiting`: the caller waits for the peer (a send for its clear-to-send)
  // although no request is in flight.
  ncclResult_t check_health(bool waiting = false) {
    if (faulted()) return fault();
    if (port().failures() != port_failures_) {
      return fail(ncclSystemError, "device " + port().name() + ": " + port().failure_text());
    }
    auto now = std::chrono::steady_clock::now();
    if (now < next_peer_check_) return ncclSuccess;
    next_peer_check_ = now + std::chrono::milliseconds(200);
    port().poll_async_events();
    if (!waiting && !has_pending()) return ncclSuccess;
    // The link's verdict, after its own grace period (logged once there).
    if (watching_) return watch_.check_now(port().name(), peer_name());
    if (!setup_.stream.valid() || !setup_.stream.peer_closed()) return ncclSuccess;
    // A completion the peer saw acknowledged may still be on its way into
    // this queue (an ack can overtake the completion entry): fail only if
    // requests stay pending for a while after the peer left.
    if (peer_gone_since_ == std::chrono::steady_clock::time_point{}) peer_gone_since_ = now;
    if (now - peer_gone_since_ < std::chrono::seconds(1)) return ncclSuccess;
    return fail(ncclRemoteError, "peer " + peer_name() +
                                     " closed the connection (process exited or closed its "
                                     "comm) with operations still pending");
  }

  static ncclResult_t status_result(ibv_wc_status status) {
    switch (status) {
      case IBV_WC_RETRY_EXC_ERR:
      case IBV_WC_RNR_RETRY_EXC_ERR:
      case IBV_WC_REM_ACCESS_ERR:
      case IBV_WC_REM_INV_REQ_ERR:
      case IBV_WC_REM_OP_ERR:
      case IBV_WC_REM_ABORT_ERR:
      case IBV_WC_RESP_TIMEOUT_ERR:
        return ncclRemoteError;
      default:
        return ncclSystemError;
    }
  }

  std::string describe_failure(const ibv_wc& wc) {
    char text[320];
    std::snprintf(text, sizeof(text),
                  "%s completion failed on device %s, QP %u: %s (status %d, vendor error 0x%x)%s",
                  opcode_name(wc), port().name().c_str(), wc.qp_num,
                  port().api().wc_status_str(wc.status), static_cast<int>(wc.status), wc.vendor_err,
                  status_hint(wc.status));
    return text;
  }

  virtual void on_completion(const ibv_wc& wc) = 0;
  virtual bool has_pending() const = 0;
  virtual void release_slot(VerbsRequest* /*request*/) {}

 private:
  static const char* opcode_name(const ibv_wc& wc) {
    switch (wr_kind(wc.wr_id)) {
      case WrKind::Data:
        return "data";
      case WrKind::Cts:
        return "clear-to-send";
      case WrKind::Flush:
        return "flush read";
    }
    return "unknown";
  }
  static const char* status_hint(ibv_wc_status status) {
    switch (status) {
      case IBV_WC_RETRY_EXC_ERR:
        return "; the peer stopped answering (process gone, link down, or a fabric problem; "
               "WEFT_IB_TIMEOUT / WEFT_IB_RETRY_CNT set how long to wait)";
      case IBV_WC_RNR_RETRY_EXC_ERR:
        return "; the peer had no receive posted";
      case IBV_WC_REM_ACCESS_ERR:
        return "; the peer refused the access (a buffer deregistered too early?)";
      default:
        return "";
    }
  }

  ConnectionSetup setup_;
  uint32_t port_failures_ = 0;
  ConnectionFault fault_;
  RequestPool<VerbsRequest, kMaxRequests * kMaxRecvs> pool_;
  PeerWatch watch_;
  bool watching_ = false;
  std::unique_ptr<ExchangeCarrier> carrier_;
  std::chrono::steady_clock::time_point next_peer_check_{};
  std::chrono::steady_clock::time_point peer_gone_since_{};
};

}  // namespace weft::verbs
