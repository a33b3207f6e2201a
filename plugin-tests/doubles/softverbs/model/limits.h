// Device limits a test can lower (SOFTVERBS_MAX_QP, SOFTVERBS_MAX_CQ,
// SOFTVERBS_MAX_MR, SOFTVERBS_MAX_CQE): ibv_query_device reports them, and
// one object more than the limit fails with ENOMEM, a CQ deeper than
// max_cqe with EINVAL, as hardware does. Counted per process (each rank's
// process has its own software NIC), where hardware counts per device.
#pragma once

namespace softverbs {

struct DeviceLimits {
  int max_qp;
  int max_cq;
  int max_mr;
  int max_cqe;
};

// Read from the environment on each call: tests change it between cases.
DeviceLimits device_limits();

enum class LimitedObject { kQp, kCq, kMr };

// Counts one more live object; false (errno ENOMEM, nothing counted) at the limit.
bool take_object(LimitedObject kind);
void release_object(LimitedObject kind);

}  // namespace softverbs
