// NCCL's LL and LL128 protocols poll a received line for its flags and use
// the data as soon as they appear: correct only where the network delivers
// each aligned 128-byte line whole and in order. A fabric that cannot
// promise that (EFA without its in-order options) must keep NCCL on the
// Simple protocol, or NCCL reads half-written lines: silent corruption.
//
// One guard per process: every endpoint reports whether it has the order.
// The first endpoint without it sets NCCL_PROTO=Simple (unless the user
// chose NCCL_PROTO), which works only before NCCL reads NCCL_PROTO, so the
// transport reports once from init. An endpoint without the order after
// others had it is refused: NCCL may already be running LL128 over them.
#pragma once

#include <mutex>
#include <string>

#include "weft/transport.h"

namespace weft {

class LineOrderGuard {
 public:
  enum class State {
    Unknown,     // nothing reported yet
    Ordered,     // every endpoint so far had the order; NCCL_PROTO untouched
    Restricted,  // NCCL_PROTO=Simple set by weft, or chosen by the user
  };

  // The guard of this process.
  static LineOrderGuard& process();

  // `device` reports whether its endpoints deliver aligned 128-byte lines in
  // order (`ordered`); `why` says what was asked and refused when not.
  // Returns ncclSystemError, logged, when the order is lost after NCCL was
  // left free to use LL128.
  ncclResult_t report(const std::string& device, bool ordered, const std::string& why);

  State state() const;
  // Tests only: forget what was reported.
  void reset();

 private:
  mutable std::mutex mutex_;
  State state_ = State::Unknown;
};

}  // namespace weft
