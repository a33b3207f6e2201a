#include "ofi/comm/listen_comm.h"

#include <rdma/fi_errno.h>

#include <algorithm>

#include "ofi/fabric/provider_quirks.h"
#include "weft/log.h"

namespace weft::ofi {

OfiListenComm::OfiListenComm(std::shared_ptr<Endpoint> endpoint, uint32_t listen_id,
                             uint64_t secret, ListenSetup setup)
    : endpoint_(std::move(endpoint)),
      device_name_(endpoint_->device_name()),
      listen_id_(listen_id),
      secret_(secret),
      setup_(std::move(setup)) {}

OfiListenComm::~OfiListenComm() {
  if (admitted_) setup_.links->revoke(secret_);
  if (opened_) endpoint_->connect_inbox().close(listen_id_);
  endpoint_->release_id(listen_id_);
}

ncclResult_t OfiListenComm::start() {
  ncclResult_t result = endpoint_->connect_inbox().open(listen_id_, secret_);
  opened_ = result == ncclSuccess;
  // A connecting process opens its liveness link to this one while it
  // waits for the answer (it watches for this process dying before it
  // accepts), its hello proven by this listen's secret.
  if (opened_ && setup_.links) {
    setup_.links->admit(secret_);
    admitted_ = true;
  }
  return result;
}

ncclResult_t OfiListenComm::accept(RecvComm** recv_comm) {
  *recv_comm = nullptr;
  if (!accepting_) {
    ncclResult_t result = endpoint_->poll();
    if (result != ncclSuccess) return result;
    ConnectRequest request;
    bool arrived = false;
    result = endpoint_->connect_inbox().take(listen_id_, &request, &arrived);
    // The inbox kept it only as it presented this listener's secret.
    if (result != ncclSuccess || !arrived) return result;
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
    if (result != ncclSuccess) return result;
    accepting_ =
        std::make_unique<OfiRecvComm>(std::move(setup), endpoint_->next_id(),
                                      request.connector_comm_id, request.process, request.link_key);
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
  delete this;
}

}  // namespace weft::ofi
