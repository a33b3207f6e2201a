#include "verbs/queue_pairs.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

namespace weft::verbs {
namespace {

std::string failed(const std::string& call) {
  return call + " failed: " + std::strerror(errno != 0 ? errno : EINVAL);
}

// The device ran out below the limit this process counts to: other
// processes on the device hold the rest.
std::string failed(const std::string& call, const DeviceLimits& limits, DeviceObject kind) {
  const bool exhausted = errno == ENOMEM;
  std::string text = failed(call);
  if (exhausted) text += limits.refusal_context(kind);
  return text;
}

}  // namespace

QueuePairs& QueuePairs::operator=(QueuePairs&& other) noexcept {
  if (this != &other) {
    reset();
    port_ = other.port_;
    cq_ = std::move(other.cq_);
    qps_ = std::move(other.qps_);
    capacity_ = other.capacity_;
    counted_cqs_ = std::exchange(other.counted_cqs_, 0);
    counted_qps_ = std::exchange(other.counted_qps_, 0);
  }
  return *this;
}

void QueuePairs::reset() {
  qps_.clear();
  cq_.reset();
  if (port_ != nullptr) {
    port_->limits().release(DeviceObject::QueuePair, std::exchange(counted_qps_, 0));
    port_->limits().release(DeviceObject::CompletionQueue, std::exchange(counted_cqs_, 0));
  }
}

bool QueuePairs::create(OpenPort& port, int count, const QpCapacity& wanted, std::string* error) {
  if (!create_completion_queue(port, count, wanted, error)) return false;
  for (int i = 0; i < count; ++i) {
    if (!open(i, error)) return false;
  }
  return true;
}

bool QueuePairs::create_completion_queue(OpenPort& port, int count, const QpCapacity& wanted,
                                         std::string* error) {
  reset();
  port_ = &port;
  const IbverbsApi& api = port.api();
  const ibv_device_attr& attr = port.device_attr();
  DeviceLimits& limits = port.limits();
  QpCapacity capacity = wanted;
  uint32_t max_wr = attr.max_qp_wr > 0 ? static_cast<uint32_t>(attr.max_qp_wr) : 1024;
  capacity.send_wrs = std::min(capacity.send_wrs, max_wr);
  capacity.recv_wrs = std::min(capacity.recv_wrs, max_wr);
  const int entries_per_qp = static_cast<int>(capacity.send_wrs + capacity.recv_wrs);
  // A queue that overflows fails the whole device context: refuse instead.
  *error = completion_depth_problem(port.name(), count, entries_per_qp, attr.max_cqe);
  if (!error->empty()) return false;
  if (!limits.take(DeviceObject::CompletionQueue, 1, error)) return false;
  counted_cqs_ = 1;
  errno = 0;
  cq_ = {api.create_cq(port.context(), count * entries_per_qp, nullptr, nullptr, 0),
         api.destroy_cq};
  if (!cq_) {
    *error = failed("ibv_create_cq", limits, DeviceObject::CompletionQueue);
    return false;
  }
  qps_.clear();
  for (int i = 0; i < count; ++i) qps_.emplace_back(nullptr, api.destroy_qp);
  capacity_ = capacity;
  return true;
}

bool QueuePairs::open(int index, std::string* error) {
  if (qps_[static_cast<size_t>(index)]) return true;
  OpenPort& port = *port_;
  const IbverbsApi& api = port.api();
  const ibv_device_attr& attr = port.device_attr();
  DeviceLimits& limits = port.limits();
  if (!limits.take(DeviceObject::QueuePair, 1, error)) return false;
  ++counted_qps_;
  ibv_qp_init_attr init{};
  init.send_cq = cq_.get();
  init.recv_cq = cq_.get();
  init.qp_type = IBV_QPT_RC;
  init.cap.max_send_wr = capacity_.send_wrs;
  init.cap.max_recv_wr = capacity_.recv_wrs;
  init.cap.max_send_sge = 1;
  init.cap.max_recv_sge = 1;
  init.cap.max_inline_data = capacity_.inline_bytes;
  errno = 0;
  ibv_qp* qp = api.create_qp(port.pd(), &init);
  if (qp == nullptr && capacity_.inline_bytes > 0) {
    // Some devices offer no inline data: do without.
    init.cap.max_inline_data = 0;
    qp = api.create_qp(port.pd(), &init);
  }
  if (qp == nullptr) {
    *error = failed("ibv_create_qp", limits, DeviceObject::QueuePair);
    return false;
  }
  qps_[static_cast<size_t>(index)].reset(qp);
  capacity_.inline_bytes = init.cap.max_inline_data;
  ibv_qp_attr attr_init{};
  attr_init.qp_state = IBV_QPS_INIT;
  attr_init.pkey_index = 0;
  attr_init.port_num = static_cast<uint8_t>(port.port_number());
  attr_init.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
  // One-sided signals are remote fetch-and-adds where the device has them.
  if (attr.atomic_cap != IBV_ATOMIC_NONE) attr_init.qp_access_flags |= IBV_ACCESS_REMOTE_ATOMIC;
  errno = 0;
  if (api.modify_qp(qp, &attr_init,
                    IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS) != 0) {
    *error = failed("ibv_modify_qp(INIT)");
    return false;
  }
  return true;
}

bool QueuePairs::query_ece(uint32_t* vendor_id, uint32_t* options) const {
  const IbverbsApi& api = port_->api();
  if (api.query_ece == nullptr || qps_.empty()) return false;
  ibv_ece ece{};
  if (api.query_ece(qps_[0].get(), &ece) != 0) return false;
  *vendor_id = ece.vendor_id;
  *options = ece.options;
  return true;
}

bool QueuePairs::set_ece(uint32_t vendor_id, uint32_t options, std::string* error) {
  const IbverbsApi& api = port_->api();
  if (api.set_ece == nullptr) {
    *error = "this rdma-core has no ibv_set_ece";
    return false;
  }
  for (const auto& qp : qps_) {
    ibv_ece ece{};
    ece.vendor_id = vendor_id;
    ece.options = options;
    int rc = api.set_ece(qp.get(), &ece);
    if (rc != 0) {
      *error = "ibv_set_ece(vendor " + std::to_string(vendor_id) + ", options " +
               std::to_string(options) + ") failed: " + std::strerror(rc);
      return false;
    }
  }
  return true;
}

bool QueuePairs::connect(int index, uint32_t remote_qpn, const ConnectionInfo& remote,
                         const QpSettings& settings, std::string* error) {
  const IbverbsApi& api = port_->api();
  const PortAddress& local = port_->address();
  ibv_qp* qp = this->qp(index);
  if (settings.pkey_index != 0) {
    ibv_qp_attr pkey{};
    pkey.pkey_index = static_cast<uint16_t>(settings.pkey_index);
    errno = 0;
    if (api.modify_qp(qp, &pkey, IBV_QP_PKEY_INDEX) != 0) {
      *error = failed("ibv_modify_qp(pkey index " + std::to_string(settings.pkey_index) + ")");
      return false;
    }
  }
  ibv_qp_attr rtr{};
  rtr.qp_state = IBV_QPS_RTR;
  rtr.path_mtu = static_cast<ibv_mtu>(std::min(local.active_mtu, remote.mtu));
  rtr.dest_qp_num = remote_qpn;
  rtr.rq_psn = 0;
  const ibv_device_attr& device = port_->device_attr();
  rtr.max_dest_rd_atomic =
      static_cast<uint8_t>(std::clamp(settings.rd_atomic, 1, std::max(1, device.max_qp_rd_atom)));
  rtr.min_rnr_timer = 12;
  rtr.ah_attr.dlid = remote.lid;
  rtr.ah_attr.sl = static_cast<uint8_t>(settings.service_level);
  rtr.ah_attr.port_num = static_cast<uint8_t>(port_->port_number());
  if (local.link_layer == LinkLayer::Ethernet || remote.lid == 0) {
    rtr.ah_attr.is_global = 1;
    std::memcpy(rtr.ah_attr.grh.dgid.raw, remote.gid, 16);
    rtr.ah_attr.grh.sgid_index = static_cast<uint8_t>(local.gid_index);
    rtr.ah_attr.grh.hop_limit = 255;
    rtr.ah_attr.grh.traffic_class = static_cast<uint8_t>(settings.traffic_class);
  }
  errno = 0;
  if (api.modify_qp(qp, &rtr,
                    IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                        IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER) != 0) {
    *error = failed("ibv_modify_qp(RTR)");
    return false;
  }
  ibv_qp_attr rts{};
  rts.qp_state = IBV_QPS_RTS;
  rts.timeout = static_cast<uint8_t>(settings.timeout);
  rts.retry_cnt = static_cast<uint8_t>(settings.retry_count);
  rts.rnr_retry = 7;
  rts.sq_psn = 0;
  rts.max_rd_atomic = static_cast<uint8_t>(
      std::clamp(settings.rd_atomic, 1, std::max(1, device.max_qp_init_rd_atom)));
  errno = 0;
  if (api.modify_qp(qp, &rts,
                    IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                        IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC) != 0) {
    *error = failed("ibv_modify_qp(RTS)");
    return false;
  }
  return true;
}

}  // namespace weft::verbs
