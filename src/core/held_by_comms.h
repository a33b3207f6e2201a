// What a device opens on first use and holds only through the comms using
// it (a libfabric endpoint, a verbs port's context): NCCL v6..v10 unload
// the plugin without finalize, so anything the transport itself kept would
// stay open, and a reload must find nothing of the last one.
#pragma once

#include <memory>
#include <mutex>

#include "nccl/types.h"

namespace weft {

template <typename T>
class HeldByComms {
 public:
  // The open one, or a fresh one from open(std::shared_ptr<T>*) ->
  // ncclResult_t when none is held or `usable(const T&)` refuses the held
  // one (those still using it keep it alive until they close).
  template <typename Usable, typename Open>
  ncclResult_t get(Usable&& usable, Open&& open, std::shared_ptr<T>* out) {
    std::lock_guard<std::mutex> lock(mutex_);
    std::shared_ptr<T> held = held_.lock();
    if (held && !usable(*held)) held.reset();
    if (!held) {
      if (ncclResult_t result = open(&held); result != ncclSuccess) return result;
      held_ = held;
    }
    *out = std::move(held);
    return ncclSuccess;
  }

  // The open one, or null: opens nothing.
  std::shared_ptr<T> peek() {
    std::lock_guard<std::mutex> lock(mutex_);
    return held_.lock();
  }

 private:
  std::mutex mutex_;
  std::weak_ptr<T> held_;
};

}  // namespace weft
