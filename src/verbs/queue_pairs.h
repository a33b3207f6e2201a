// The reliable-connected queue pairs of one connection and the completion
// queue they share: created in INIT (so receives can be posted at once),
// then moved to RTR/RTS against the peer's connection info.
#pragma once

#include <string>
#include <vector>

#include "verbs/device_limits.h"
#include "verbs/open_port.h"
#include "verbs/wire.h"

namespace weft::verbs {

struct QpSettings {
  int traffic_class = 0;
  int service_level = 0;
  int timeout = 20;
  int retry_count = 7;
  int pkey_index = 0;
  bool ece = true;  // negotiate ECE where the device offers it
  // RDMA reads and atomics in flight per queue pair, each way (one-sided
  // gets want several), capped by what the device allows.
  int rd_atomic = 1;
};

struct QpCapacity {
  uint32_t send_wrs = 0;
  uint32_t recv_wrs = 0;
  uint32_t inline_bytes = 0;
};

class QueuePairs {
 public:
  QueuePairs() = default;
  QueuePairs(QueuePairs&& other) noexcept { *this = std::move(other); }
  // Not defaulted: member-wise assignment would replace the CQ before the
  // QPs on it, and a CQ with QPs cannot be destroyed (EBUSY): it leaked.
  QueuePairs& operator=(QueuePairs&& other) noexcept;
  ~QueuePairs() { reset(); }

  // Destroys the QPs, then their CQ.
  void reset();

  // `count` QPs over one new CQ, in INIT, counted against the device's
  // limits until reset(). False with the failing call or limit in *error.
  bool create(OpenPort& port, int count, const QpCapacity& wanted, std::string* error);
  // The same CQ, for `count` QPs that are made one by one as they are
  // needed (open): one-sided comms meet a rank on first use.
  bool create_completion_queue(OpenPort& port, int count, const QpCapacity& wanted,
                               std::string* error);
  // QP `index` in INIT, made now unless it was already.
  bool open(int index, std::string* error);
  bool is_open(int index) const { return qps_[static_cast<size_t>(index)] != nullptr; }
  // QP `index` to RTR and RTS towards the peer's `remote_qpn` at `remote`'s address.
  bool connect(int index, uint32_t remote_qpn, const ConnectionInfo& remote,
               const QpSettings& settings, std::string* error);

  // Enhanced Connection Establishment (before RTR): what the first queue
  // pair offers, false where the device or rdma-core has none; and the
  // peer's choice applied to every queue pair (false, with the reason, where
  // the device refuses it).
  bool query_ece(uint32_t* vendor_id, uint32_t* options) const;
  bool set_ece(uint32_t vendor_id, uint32_t options, std::string* error);

  int count() const { return static_cast<int>(qps_.size()); }
  int open_count() const { return counted_qps_; }
  ibv_qp* qp(int index) const { return qps_[static_cast<size_t>(index)].get(); }
  ibv_cq* cq() const { return cq_.get(); }
  const QpCapacity& capacity() const { return capacity_; }

 private:
  OpenPort* port_ = nullptr;
  std::unique_ptr<ibv_cq, int (*)(ibv_cq*)> cq_{nullptr, nullptr};
  std::vector<VerbsPtr<ibv_qp>> qps_;
  QpCapacity capacity_;
  int counted_cqs_ = 0;
  int counted_qps_ = 0;
};

}  // namespace weft::verbs
