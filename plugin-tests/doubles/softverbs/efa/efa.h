// What the EFA personality's files share: the efadv_* structures of rdma-core
// releases newer than the installed headers (rdma-core 44), the extended CQ
// and QP objects, and the entry points between the files.
//
// Fidelity notes (where the double knowingly differs from rdma-core's efa
// provider):
// - The provider's direct data path (libfabric writing the device rings
//   itself) stays off: efadv_query_qp_wqs, efadv_query_cq and efadv_query_mr
//   are not exported, so a libfabric built against rdma-core >= 50 with them
//   would fail to load; one built against rdma-core 44 (CI's) has the code
//   compiled out.
// - Verbs statuses of failed SRD WRs approximate rdma-core's; the EFA status
//   (ibv_wc_read_vendor_err) is what libfabric acts on, and it is modelled.
// - ibv_post_send on an SRD QP fails with EOPNOTSUPP: work goes through
//   ibv_qp_ex (wr_start .. wr_complete), as libfabric posts it.
// - UD QPs (libfabric's FI_EP_DGRAM) are not modelled: efadv_create_qp_ex and
//   ibv_create_qp_ex refuse IBV_QPT_UD with EOPNOTSUPP.
#pragma once

#include <infiniband/efadv.h>
#include <infiniband/verbs.h>

#include <cstdint>
#include <vector>

#include "model/completion.h"
#include "model/context.h"
#include "model/queue_pair.h"

namespace softverbs::efa {

// Device capabilities (efadv_device_attr.device_caps) of newer rdma-core.
constexpr uint32_t kCapRdmaRead = 1u << 0;
constexpr uint32_t kCapRnrRetry = 1u << 1;
constexpr uint32_t kCapCqWithSgid = 1u << 2;
constexpr uint32_t kCapRdmaWrite = 1u << 3;
constexpr uint32_t kCapUnsolicitedWriteRecv = 1u << 4;

// efadv_cq_init_attr.wc_flags.
constexpr uint64_t kWcWithSgid = 1u << 0;
constexpr uint64_t kWcWithIsUnsolicited = 1u << 1;

// efadv_qp_init_attr as rdma-core >= 49 has it (flags and sl where 44 has
// reserved bytes).
struct QpInitAttr {
  uint64_t comp_mask;
  uint32_t driver_qp_type;
  uint16_t flags;
  uint8_t sl;
  uint8_t reserved[1];
};
constexpr uint16_t kQpFlagUnsolicitedWriteRecv = 1u << 0;

// efadv_cq with the unsolicited-receive query newer rdma-core appends.
struct DvCq {
  uint64_t comp_mask;
  int (*wc_read_sgid)(efadv_cq* cq, ibv_gid* sgid);
  bool (*wc_is_unsolicited)(efadv_cq* cq);
};

// The extended state of a CQ made by efadv_create_cq or ibv_create_cq_ex.
struct CqExt {
  DvCq dv{};  // first: efadv_cq pointers lead here
  Cq* cq = nullptr;
  bool is_efadv = false;  // made by efadv_create_cq
  Cqe current;            // the entry start_poll / next_poll reached
};

// The extended QP ibv_qp_to_qp_ex hands out, and the WRs of the batch being
// built between wr_start and wr_complete.
struct QpEx {
  ibv_qp_ex ex{};  // first: ibv_qp_ex pointers lead here
  Qp* qp = nullptr;
  std::vector<SendWr> batch;
  int error = 0;  // the first error of the batch, reported by wr_complete
};

// cq_ex.cpp
ibv_cq_ex* create_cq_ex(ibv_context* context, ibv_cq_init_attr_ex* attr);
// qp_ex.cpp
ibv_qp* create_qp_ex(ibv_context* context, ibv_qp_init_attr_ex* attr);
ibv_qp* create_srd_qp(ibv_context* context, ibv_qp_init_attr_ex* attr, uint16_t flags);

}  // namespace softverbs::efa
