#include "ofi/memory_region.h"

#include <rdma/fi_errno.h>

#include <memory>

#include "ofi/endpoint.h"
#include "weft/log.h"

namespace weft::ofi {

ncclResult_t register_memory(Endpoint& endpoint, void* data, size_t size, int type,
                             void** mhandle) {
  *mhandle = nullptr;
  if (type != NCCL_PTR_HOST) {
    WEFT_WARN(
        "%s: cannot register memory of type %d at %p: this build supports host memory "
        "only (ptrSupport=HOST)",
        endpoint.device_name().c_str(), type, data);
    return ncclInvalidArgument;
  }
  auto region = std::make_unique<MemoryRegion>();
  region->base = data;
  region->size = size;
  if (endpoint.needs_local_mr() && size > 0) {
    fid_mr* mr = nullptr;
    int rc = endpoint.register_region(data, size, &mr);
    if (rc != 0) {
      WEFT_WARN("%s: registering %zu bytes of host memory at %p failed: %s (%d)",
                endpoint.device_name().c_str(), size, data, fi_strerror(-rc), rc);
      return ncclSystemError;
    }
    region->mr = mr;
    region->descriptor = fi_mr_desc(mr);
  }
  *mhandle = region.release();
  return ncclSuccess;
}

ncclResult_t deregister_memory(Endpoint* endpoint, const std::string& device_name, void* mhandle) {
  if (mhandle == nullptr) return ncclSuccess;
  auto* region = static_cast<MemoryRegion*>(mhandle);
  if (region->magic != MemoryRegion::kMagic) {
    WEFT_WARN("%s: deregMr called with an invalid handle %p", device_name.c_str(), mhandle);
    return ncclInvalidArgument;
  }
  region->magic = 0;
  ncclResult_t result = ncclSuccess;
  if (region->mr != nullptr) {
    int rc = endpoint != nullptr ? endpoint->close_region(region->mr) : fi_close(&region->mr->fid);
    if (rc != 0) {
      WEFT_WARN("%s: deregistering memory at %p failed: %s", device_name.c_str(), region->base,
                fi_strerror(-rc));
      result = ncclSystemError;
    }
  }
  delete region;
  return result;
}

}  // namespace weft::ofi
