// Memory registration on a device's domain. Providers that need local
// registration (FI_MR_LOCAL) get a real fi_mr; others get a handle with no
// descriptor, so NCCL's regMr/deregMr pairs work the same everywhere.
#pragma once

#include <rdma/fi_domain.h>

#include <cstdint>
#include <string>

#include "nccl/types.h"

namespace weft::ofi {

class Endpoint;

struct MemoryRegion {
  static constexpr uint32_t kMagic = 0x574d5247;  // "WMRG"
  uint32_t magic = kMagic;
  fid_mr* mr = nullptr;
  void* descriptor = nullptr;
  void* base = nullptr;
  size_t size = 0;
};

ncclResult_t register_memory(Endpoint& endpoint, void* data, size_t size, int type, void** mhandle);
// `endpoint` may be null for comms left to their endpoint, which deregister
// while it closes (single-threaded by then).
ncclResult_t deregister_memory(Endpoint* endpoint, const std::string& device_name, void* mhandle);

// Descriptor to pass with a data operation; nullptr for a NULL handle.
inline void* descriptor_of(void* mhandle) {
  return mhandle == nullptr ? nullptr : static_cast<MemoryRegion*>(mhandle)->descriptor;
}

}  // namespace weft::ofi
