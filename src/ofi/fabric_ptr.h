// RAII for libfabric objects: fi_close on destruction.
#pragma once

#include <rdma/fabric.h>

#include <memory>

#include "weft/log.h"

namespace weft::ofi {

inline const char* fid_class_name(size_t fclass) {
  switch (fclass) {
    case FI_CLASS_EP:
      return "endpoint";
    case FI_CLASS_CQ:
      return "completion queue";
    case FI_CLASS_AV:
      return "address vector";
    case FI_CLASS_MR:
      return "memory region";
    case FI_CLASS_DOMAIN:
      return "domain";
    case FI_CLASS_FABRIC:
      return "fabric";
    default:
      return "libfabric object";
  }
}

struct FidCloser {
  template <typename T>
  void operator()(T* object) const {
    if (object == nullptr) return;
    // A failed close leaks the object and keeps its parent busy: say so.
    int rc = fi_close(&object->fid);
    if (rc != 0)
      WEFT_WARN("fi_close of a %s failed: %s", fid_class_name(object->fid.fclass),
                fi_strerror(-rc));
  }
};

template <typename T>
using FabricPtr = std::unique_ptr<T, FidCloser>;

// The libfabric API version weft asks for: what it was built against, or
// the library's own if that is older.
inline uint32_t fabric_api_version() {
  uint32_t built = FI_VERSION(FI_MAJOR_VERSION, FI_MINOR_VERSION);
  uint32_t running = fi_version();
  return running < built ? running : built;
}

struct InfoDeleter {
  void operator()(fi_info* info) const { fi_freeinfo(info); }
};
using InfoPtr = std::unique_ptr<fi_info, InfoDeleter>;

}  // namespace weft::ofi
