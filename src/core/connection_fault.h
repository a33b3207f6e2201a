// A connection that can no longer be used: its peer broke the protocol,
// vanished, or a completion failed. The first failure wins: it alone is
// logged, and every later call on the connection returns its result.
// Safe to raise from any thread (libfabric completions of a shared
// endpoint arrive on whichever thread polls it).
#pragma once

#include <atomic>
#include <string>

#include "nccl/types.h"
#include "weft/log.h"

namespace weft {

class ConnectionFault {
 public:
  // Returns the connection's result: `result` if this is the first
  // failure, the first one's otherwise.
  [[gnu::cold]] ncclResult_t raise(ncclResult_t result, const std::string& device,
                                   const std::string& peer, const std::string& reason) {
    int expected = ncclSuccess;
    if (result_.compare_exchange_strong(expected, result, std::memory_order_acq_rel)) {
      WEFT_WARN("%s: connection with %s failed: %s; the connection is unusable", device.c_str(),
                peer.c_str(), reason.c_str());
      return result;
    }
    return static_cast<ncclResult_t>(expected);
  }
  ncclResult_t result() const {
    return static_cast<ncclResult_t>(result_.load(std::memory_order_acquire));
  }
  bool raised() const { return result() != ncclSuccess; }

 private:
  std::atomic<int> result_{ncclSuccess};
};

}  // namespace weft
