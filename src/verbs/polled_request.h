// A verbs request: only the owning comm's thread reads the comm's own
// completion queue (a CQ per connection), so plain fields do, and the comm
// sets the result and the sizes itself.
#pragma once

#include "core/request_owner.h"
#include "weft/log.h"
#include "weft/transport.h"

namespace weft::verbs {

// MaxSizes: the most receives one request groups.
template <int MaxSizes>
class PolledRequest final : public Request {
 public:
  void start(RequestOwner* owner, int group) {
    owner_ = owner;
    count = group;
    pending = 0;
    result = ncclSuccess;
    in_flight_ = true;
  }

  ncclResult_t test(int* done, int* sizes_out) override {
    *done = 0;
    if (!in_flight_) {
      WEFT_WARN("test() of request %p, which is not in flight", static_cast<void*>(this));
      return ncclInvalidArgument;
    }
    if (pending > 0) {
      // Fails only once the connection failed: then pending requests end with it.
      ncclResult_t progress = owner_->progress();
      if (progress != ncclSuccess) return finish(progress);
      if (pending > 0) return ncclSuccess;
    }
    if (result == ncclSuccess) {
      if (sizes_out != nullptr) {
        for (int i = 0; i < count; ++i) sizes_out[i] = static_cast<int>(sizes[i]);
      }
      *done = 1;
    }
    return finish(result);
  }

  int count = 0;    // receives of the group (1 for a send, 0 for a flush)
  int pending = 0;  // completions still expected
  int slot = 0;     // the owner's index for it (FIFO slot, flush slot)
  ncclResult_t result = ncclSuccess;
  size_t posted[MaxSizes] = {};
  size_t sizes[MaxSizes] = {};

 private:
  ncclResult_t finish(ncclResult_t outcome) {
    in_flight_ = false;
    owner_->recycle(this);
    return outcome;
  }

  RequestOwner* owner_ = nullptr;
  bool in_flight_ = false;
};

}  // namespace weft::verbs
