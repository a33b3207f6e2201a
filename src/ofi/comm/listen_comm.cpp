#include "ofi/comm/listen_comm.h"

#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>

#include <algorithm>
#include <chrono>
#include <cstdio>

#include "core/listen_secret.h"
#include "ofi/endpoint/tag_layout.h"
#include "ofi/fabric/provider_quirks.h"
#include "weft/log.h"

namespace weft::ofi {

OfiListenComm::OfiListenComm(std::shared_ptr<Endpoint> endpoint, uint32_t listen_id,
                             uint64_t secret, ListenSetup setup)
    : endpoint_(std::move(endpoint)),
      device_name_(endpoint_->device_name()),
      listen_id_(listen_id),
      secret_(secret),
      setup_(std::move(setup)) {
  op_.target = this;
  op_.slot = 0;
}

OfiListenComm::~OfiListenComm() {
  deregister_memory(endpoint_.get(), device_name_, region_);
}

ncclResult_t OfiListenComm::start() {
  ncclResult_t result =
      register_memory(*endpoint_, buffer_, sizeof(buffer_), MemorySource{}, &region_);
  if (result != ncclSuccess) return result;
  return post_request_receive();
}

ncclResult_t OfiListenComm::post_request_receive() {
  arrived_.store(false, std::memory_order_relaxed);
  error_.store(0, std::memory_order_relaxed);
  // EAGAIN that lasts means the provider's receive queue is full, e.g. of
  // thousands of listens' receives (tagged protocol): an error, not a spin.
  constexpr auto kFullFor = std::chrono::seconds(2);
  const auto deadline = std::chrono::steady_clock::now() + kFullFor;
  for (;;) {
    ssize_t rc = endpoint_->receive(buffer_, sizeof(buffer_), descriptor_of(region_),
                                    connect_tag(listen_id_), &op_);
    if (rc == 0) break;
    if (rc == -FI_EAGAIN && std::chrono::steady_clock::now() > deadline) {
      WEFT_WARN(
          "%s: posting the connect-request receive failed for %lld s%s; each listening comm "
          "keeps a receive posted until it accepts, as does every receive of the tagged "
          "protocol (docs/scale.md)",
          endpoint_->device_name().c_str(), static_cast<long long>(kFullFor.count()),
          receive_queue_full_note(endpoint_->provider_name()).c_str());
      return ncclSystemError;
    }
    if (rc != -FI_EAGAIN) {
      // shm says ENOMEM when its receive queue is full.
      WEFT_WARN(
          "%s: posting the connect-request receive failed: %s%s", endpoint_->device_name().c_str(),
          fi_strerror((int)-rc),
          rc == -FI_ENOMEM ? receive_queue_full_note(endpoint_->provider_name()).c_str() : "");
      return ncclSystemError;
    }
    ncclResult_t result = endpoint_->poll();
    if (result != ncclSuccess) return result;
  }
  posted_ = true;
  return ncclSuccess;
}

ncclResult_t OfiListenComm::accept(RecvComm** recv_comm) {
  *recv_comm = nullptr;
  if (!accepting_) {
    ncclResult_t result = endpoint_->poll();
    if (result != ncclSuccess) return result;
    if (!arrived_.load(std::memory_order_acquire)) return ncclSuccess;
    posted_ = false;
    if (int error = error_.load(std::memory_order_relaxed)) {
      WEFT_WARN("%s: receiving a connect request failed: %s (%s)", endpoint_->device_name().c_str(),
                fi_strerror(error), error_text_);
      return ncclSystemError;
    }
    ConnectRequest request;
    std::string problem;
    bool valid = decode_connect_request(buffer_, length_, &request, &problem);
    if (!valid) {
      // Not fatal for this listener: a stray or corrupt request is dropped.
      WEFT_WARN("%s: ignoring a connect request: %s", endpoint_->device_name().c_str(),
                problem.c_str());
      return post_request_receive();
    }
    if (!listen_secret_matches(secret_, request.secret)) {
      // Nothing of it is kept and nothing answers it: the sender learns
      // nothing, and the next request is received as before.
      log_refused_connect(device_name_ + " listener " + std::to_string(listen_id_),
                          "a peer that names itself " +
                              endpoint_->address_to_string(request.address, request.address_size));
      return post_request_receive();
    }
    Protocol own = endpoint_->rdma() ? Protocol::Rdma : Protocol::Tagged;
    if (request.protocol != own) {
      // The acknowledgement names ours: the connecting side fails with this.
      WEFT_WARN(
          "%s: a peer connects with the %s protocol, this side uses %s; set the same "
          "WEFT_OFI_PROTOCOL on every node",
          endpoint_->device_name().c_str(), protocol_name(request.protocol), protocol_name(own));
    }
    CommSetup setup;
    setup.endpoint = endpoint_;
    setup.close_timeout_ms = setup_.close_timeout_ms;
    setup.min_stripe = setup_.min_stripe;
    setup.links = setup_.links;
    // As many rails as both sides have (the rdma protocol only).
    size_t rails = request.protocol == own && own == Protocol::Rdma
                       ? std::min<size_t>(request.rails, 1 + setup_.extra_rails.size())
                       : 1;
    for (size_t r = 1; r < rails; ++r) setup.extra_rails.push_back({setup_.extra_rails[r - 1]});
    setup.peer_name = endpoint_->address_to_string(request.address, request.address_size);
    result = endpoint_->insert_address(request.address, request.address_size, &setup.peer);
    if (result != ncclSuccess) {
      post_request_receive();
      return result;
    }
    accepting_ =
        std::make_unique<OfiRecvComm>(std::move(setup), endpoint_->next_id(),
                                      request.connector_comm_id, request.process, request.link_key);
    result = post_request_receive();
    if (result != ncclSuccess) return result;
  }
  bool posted = false;
  ncclResult_t result = accepting_->post_ack(&posted);
  if (result != ncclSuccess || !posted) return result;
  // On a provider that resends in software only while this side progresses
  // (efa's RDM protocol, after the connecting side had no receive buffer up
  // yet), the comm is handed over once its acknowledgement completed: NCCL
  // may leave a new comm alone for a long time.
  if (resends_only_while_progressed(endpoint_->provider_name()) &&
      !accepting_->ack_delivered(&result)) {
    if (result != ncclSuccess) accepting_.release()->close();
    return result;
  }
  *recv_comm = accepting_.release();
  return ncclSuccess;
}

void OfiListenComm::close() {
  if (accepting_) accepting_.release()->close();
  if (posted_ && !arrived_.load(std::memory_order_acquire)) {
    endpoint_->cancel(&op_);
    endpoint_->release_id(listen_id_);
    std::shared_ptr<Endpoint> endpoint = endpoint_;
    finish_close(
        this, *endpoint, *endpoint, setup_.close_timeout_ms,
        [this] { return arrived_.load(std::memory_order_acquire); }, [this] { endpoint_.reset(); });
    return;
  }
  endpoint_->release_id(listen_id_);
  delete this;
}

void OfiListenComm::on_complete(uint32_t, size_t length, const uint64_t*) {
  length_ = length;
  arrived_.store(true, std::memory_order_release);
}

void OfiListenComm::on_error(uint32_t, int error, size_t, const char* text) {
  if (error != FI_ECANCELED) {
    std::snprintf(error_text_, sizeof(error_text_), "%s", text);
    error_.store(error, std::memory_order_relaxed);
  }
  length_ = 0;
  arrived_.store(true, std::memory_order_release);
}

}  // namespace weft::ofi
