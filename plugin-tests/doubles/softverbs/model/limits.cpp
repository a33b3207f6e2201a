#include "model/limits.h"

#include <algorithm>
#include <atomic>
#include <cerrno>

#include "model/device.h"
#include "model/env.h"

namespace softverbs {
namespace {

std::atomic<int> live[3];

int limit_from_env(const char* name, int fallback) {
  long value = env_long(name, fallback);
  return value >= 1 ? static_cast<int>(std::min<long>(value, fallback)) : fallback;
}

int limit_of(const DeviceLimits& limits, LimitedObject kind) {
  switch (kind) {
    case LimitedObject::kQp:
      return limits.max_qp;
    case LimitedObject::kCq:
      return limits.max_cq;
    case LimitedObject::kMr:
      return limits.max_mr;
  }
  return 0;
}

}  // namespace

DeviceLimits device_limits() {
  DeviceLimits limits;
  limits.max_qp = limit_from_env("SOFTVERBS_MAX_QP", 1 << 17);
  limits.max_cq = limit_from_env("SOFTVERBS_MAX_CQ", 1 << 16);
  limits.max_mr = limit_from_env("SOFTVERBS_MAX_MR", 1 << 20);
  limits.max_cqe = limit_from_env("SOFTVERBS_MAX_CQE", kMaxCqe);
  return limits;
}

bool take_object(LimitedObject kind) {
  const int limit = limit_of(device_limits(), kind);
  std::atomic<int>& count = live[static_cast<int>(kind)];
  int now = count.load();
  do {
    if (now >= limit) {
      errno = ENOMEM;
      return false;
    }
  } while (!count.compare_exchange_weak(now, now + 1));
  return true;
}

void release_object(LimitedObject kind) {
  live[static_cast<int>(kind)].fetch_sub(1);
}

}  // namespace softverbs
