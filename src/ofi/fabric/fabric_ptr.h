// RAII for libfabric objects: fi_close on destruction.
#pragma once

#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_errno.h>

#include <memory>
#include <string>

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

// A fabric and a domain opened only to ask the provider something at init
// (can it register GPU memory, which endpoint options does it accept).
// Members close in reverse order: the domain before its fabric.
struct ScratchDomain {
  FabricPtr<fid_fabric> fabric;
  FabricPtr<fid_domain> domain;
};

// False, with the failed call in `error`, when either cannot be opened.
inline bool open_scratch_domain(const fi_info* info, ScratchDomain* out, std::string* error) {
  fid_fabric* fabric = nullptr;
  if (int rc = fi_fabric(info->fabric_attr, &fabric, nullptr); rc != 0) {
    *error = std::string("fi_fabric failed: ") + fi_strerror(-rc);
    return false;
  }
  out->fabric.reset(fabric);
  fid_domain* domain = nullptr;
  if (int rc = fi_domain(fabric, const_cast<fi_info*>(info), &domain, nullptr); rc != 0) {
    *error = std::string("fi_domain failed: ") + fi_strerror(-rc);
    return false;
  }
  out->domain.reset(domain);
  return true;
}

struct InfoDeleter {
  void operator()(fi_info* info) const { fi_freeinfo(info); }
};
using InfoPtr = std::unique_ptr<fi_info, InfoDeleter>;

}  // namespace weft::ofi
