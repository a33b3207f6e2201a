// A connection that can no longer be used: its peer broke the protocol, or
// told us it gave up. The first reason is logged; every later call on the
// connection returns ncclRemoteError. Raised from any thread.
#pragma once

#include <atomic>
#include <string>

#include "nccl/types.h"
#include "weft/log.h"

namespace weft::ofi {

class ProtocolFault {
 public:
  void raise(const std::string& device, const std::string& peer, const std::string& reason) {
    bool expected = false;
    if (raised_.compare_exchange_strong(expected, true, std::memory_order_acq_rel)) {
      WEFT_WARN("%s: connection with %s failed: %s; the connection is unusable", device.c_str(),
                peer.c_str(), reason.c_str());
    }
  }
  ncclResult_t result() const {
    return raised_.load(std::memory_order_acquire) ? ncclRemoteError : ncclSuccess;
  }

 private:
  std::atomic<bool> raised_{false};
};

}  // namespace weft::ofi
