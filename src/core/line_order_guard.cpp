#include "core/line_order_guard.h"

#include <strings.h>

#include <cstdlib>

#include "weft/log.h"

namespace weft {

LineOrderGuard& LineOrderGuard::process() {
  static LineOrderGuard guard;
  return guard;
}

ncclResult_t LineOrderGuard::report(const std::string& device, bool ordered,
                                    const std::string& why) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (ordered) {
    if (state_ == State::Unknown) state_ = State::Ordered;
    return ncclSuccess;
  }
  if (state_ == State::Ordered) {
    WEFT_WARN(
        "%s: %s, but earlier endpoints had that order and NCCL may already use its LL/LL128 "
        "protocols over them: refusing this endpoint rather than risk corrupt data. Set "
        "NCCL_PROTO=Simple for this job",
        device.c_str(), why.c_str());
    return ncclSystemError;
  }
  if (state_ == State::Restricted) return ncclSuccess;
  state_ = State::Restricted;
  const char* chosen = std::getenv("NCCL_PROTO");
  if (chosen != nullptr && strcasecmp(chosen, "Simple") == 0) return ncclSuccess;
  if (chosen != nullptr && *chosen != '\0') {
    WEFT_WARN(
        "%s: %s; NCCL_PROTO=%s is the user's choice and stays: NCCL's LL and LL128 protocols "
        "can read half-written data on this fabric",
        device.c_str(), why.c_str(), chosen);
    return ncclSuccess;
  }
  ::setenv("NCCL_PROTO", "Simple", 0);
  WEFT_WARN(
      "%s: %s; set NCCL_PROTO=Simple so that NCCL does not use its LL and LL128 protocols, "
      "which need that order",
      device.c_str(), why.c_str());
  return ncclSuccess;
}

LineOrderGuard::State LineOrderGuard::state() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return state_;
}

void LineOrderGuard::reset() {
  std::lock_guard<std::mutex> lock(mutex_);
  state_ = State::Unknown;
}

}  // namespace weft
