#include "ofi/comm/send_comm.h"

#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "ofi/endpoint/tag_layout.h"
#include "ofi/fabric/provider_quirks.h"
#include "weft/log.h"

namespace weft::ofi {

OfiSendComm::OfiSendComm(CommSetup setup, uint32_t local_id, uint32_t listen_id,
                         uint64_t listen_secret, const PeerIdentity& listener,
                         int connect_timeout_ms)
    : OfiDataComm<SendComm>(std::move(setup)),
      local_id_(local_id),
      listen_id_(listen_id),
      listen_secret_(listen_secret),
      connect_deadline_(std::chrono::steady_clock::now() +
                        std::chrono::milliseconds(connect_timeout_ms)) {
  listener_watch_.watch(links(), listener, listen_secret, peer_name());
  for (uint32_t slot = 0; slot < 2; ++slot) {
    control_ops_[slot].target = this;
    control_ops_[slot].slot = slot;
  }
}

ncclResult_t OfiSendComm::step_connect(bool* connected) {
  *connected = false;
  if (std::chrono::steady_clock::now() >= connect_deadline_) {
    // Returning NULL forever would leave NCCL waiting: fail with the peer named.
    WEFT_WARN(
        "%s: connect to %s: no answer from the listener within WEFT_CONNECT_TIMEOUT_MS "
        "(is the peer process alive, listening with the same WEFT_OFI_PROVIDER, and "
        "reachable from this host?)",
        device_name().c_str(), peer_name().c_str());
    return ncclRemoteError;
  }
  // The provider may neither deliver the request nor fail it (tcp, to a
  // process that is gone): its sends return EAGAIN or complete unanswered.
  ncclResult_t watched = listener_watch_.check(device_name(), peer_name());
  if (watched != ncclSuccess) return watched;
  if (!registered_) {
    ncclResult_t result = register_control(&control_, sizeof(control_));
    if (result != ncclSuccess) return result;
    ConnectRequest request;
    request.listener_id = listen_id_;
    request.connector_comm_id = local_id_;
    request.secret = listen_secret_;
    request.protocol = endpoint().rdma() ? Protocol::Rdma : Protocol::Tagged;
    request.rails = static_cast<uint8_t>(rail_count());
    request.address_size = static_cast<uint8_t>(endpoint().local_address_size());
    std::memcpy(request.address, endpoint().local_address(), request.address_size);
    request.process = own_identity();
    request.link_key = own_link_key();
    encode_connect_request(request, control_.connect);
    registered_ = true;
  }
  // The ack receive goes first so the listener's answer always finds it.
  if (!ack_posted_) {
    ssize_t rc = endpoint().receive(control_.ack, sizeof(control_.ack), control_descriptor(),
                                    ack_tag(local_id_), &control_ops_[kAckSlot]);
    if (rc == -FI_EAGAIN) return endpoint().poll();
    if (rc != 0) {
      WEFT_WARN("%s: connect to %s: posting the acknowledgement receive failed: %s",
                device_name().c_str(), peer_name().c_str(), fi_strerror((int)-rc));
      return ncclSystemError;
    }
    ack_posted_ = true;
  }
  if (!connect_posted_) {
    // One progress call first: a provider that posts its receive buffers
    // on first progress (efa's RDM protocol) then has them up when the
    // answer comes, instead of sending it back for a later retry.
    ncclResult_t progressed = endpoint().poll();
    if (progressed != ncclSuccess) return progressed;
    ssize_t rc = endpoint().send(control_.connect, sizeof(control_.connect), control_descriptor(),
                                 peer(), kConnectInboxTag, &control_ops_[kConnectSlot]);
    if (rc == -FI_EAGAIN) return endpoint().poll();
    if (rc != 0) {
      WEFT_WARN("%s: connect to %s: sending the connect request failed: %s", device_name().c_str(),
                peer_name().c_str(), fi_strerror((int)-rc));
      return ncclSystemError;
    }
    connect_posted_ = true;
  }
  ncclResult_t result = endpoint().poll();
  if (result != ncclSuccess) return result;
  if (int error = control_error_.load(std::memory_order_acquire)) {
    return completion_failure("connect", endpoint(), peer_name(), error, 0, 0, control_error_text_);
  }
  if (!connect_done_.load(std::memory_order_acquire) ||
      !ack_done_.load(std::memory_order_acquire)) {
    return ncclSuccess;
  }
  ConnectAck ack;
  std::string error;
  if (!decode_connect_ack(control_.ack, ack_length_, &ack, &error)) {
    WEFT_WARN("%s: connect to %s: %s", device_name().c_str(), peer_name().c_str(), error.c_str());
    return ncclRemoteError;
  }
  Protocol own = endpoint().rdma() ? Protocol::Rdma : Protocol::Tagged;
  if (ack.protocol != own) {
    WEFT_WARN(
        "%s: connect to %s: the peer uses the %s protocol, this side %s; set the same "
        "WEFT_OFI_PROTOCOL on every node",
        device_name().c_str(), peer_name().c_str(), protocol_name(ack.protocol),
        protocol_name(own));
    return ncclInvalidUsage;
  }
  if (ack.rails > rail_count()) {
    WEFT_WARN("%s: connect to %s: the peer answers with %d rails, this side offered %d",
              device_name().c_str(), peer_name().c_str(), ack.rails, rail_count());
    return ncclRemoteError;
  }
  keep_rails(ack.rails);
  for (int r = 1; r < rail_count(); ++r) {
    fi_addr_t address = FI_ADDR_UNSPEC;
    ncclResult_t result =
        rail_endpoint(r).insert_address(ack.address[r], ack.address_size[r], &address);
    if (result != ncclSuccess) return result;
    set_rail_peer(r, address);
  }
  remote_id_ = ack.recv_comm_id;
  watch_peer(ack.process, ack.link_key);
  PathPeer path_peer{peer(), peer_name(), remote_id_, local_id_, watch()};
  if (own == Protocol::Rdma) {
    size_t eager = std::min<size_t>(endpoint().eager_size(), ack.eager_size);
    std::vector<RdmaRail> rails;
    for (int r = 0; r < rail_count(); ++r) {
      rails.push_back({&rail_endpoint(r), rail_peer(r), ack.write_target[r]});
    }
    RdmaSendPath& rdma =
        path_.choose<RdmaSendPath>(std::move(rails), std::move(path_peer), eager,
                                   ack.needs_size_notices, min_stripe(), rail_probe_deadline());
    ncclResult_t started = rdma.start();
    if (started != ncclSuccess) return started;
  } else {
    path_.choose<TaggedSendPath>(endpoint(), std::move(path_peer));
  }
  connected_ = true;
  *connected = true;
  WEFT_INFO(NCCL_INIT, "%s: connected to %s (send comm %u -> recv comm %u, %d rail%s)",
            device_name().c_str(), peer_name().c_str(), local_id_, remote_id_, rail_count(),
            rail_count() > 1 ? "s" : "");
  return ncclSuccess;
}

ncclResult_t OfiSendComm::isend(void* data, size_t size, int tag, void* mhandle,
                                Request** request) {
  *request = nullptr;
  if (!connected_) {
    WEFT_WARN("%s: isend on a comm that is not connected", device_name().c_str());
    return ncclInvalidUsage;
  }
  return path_.apply([&](auto& path) { return path.isend(data, size, tag, mhandle, request); });
}

void OfiSendComm::on_complete(uint32_t slot, size_t length, const uint64_t*) {
  if (slot == kAckSlot) {
    ack_length_ = length;
    ack_done_.store(true, std::memory_order_release);
  } else {
    connect_done_.store(true, std::memory_order_release);
  }
}

void OfiSendComm::on_error(uint32_t slot, int error, size_t, const char* text) {
  int expected = 0;
  if (control_error_.compare_exchange_strong(expected, error, std::memory_order_acq_rel)) {
    std::snprintf(control_error_text_, sizeof(control_error_text_), "%s", text);
  }
  if (slot == kAckSlot) {
    ack_done_.store(true, std::memory_order_release);
  } else {
    connect_done_.store(true, std::memory_order_release);
  }
}

bool OfiSendComm::in_flight() {
  if (path_.apply([](auto& path) { return path.in_flight(); })) return true;
  if (ack_posted_ && !ack_done_.load(std::memory_order_acquire)) return true;
  if (connect_posted_ && !connect_done_.load(std::memory_order_acquire)) return true;
  return false;
}

void OfiSendComm::before_close(int) {
  const RdmaSendPath* rdma = path_.get<RdmaSendPath>();
  if (rdma != nullptr && rdma->awaits_clear_to_send() &&
      completes_before_delivery(endpoint().provider_name())) {
    endpoint().expect_late_messages();
  }
}

void OfiSendComm::cancel_receives() {
  path_.apply([](auto& path) { path.cancel_receives(); });
  if (ack_posted_ && !ack_done_.load(std::memory_order_acquire)) {
    endpoint().cancel(&control_ops_[kAckSlot]);
  }
}

}  // namespace weft::ofi
