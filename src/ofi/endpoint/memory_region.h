// Memory registration on a device's domain. Every regMr becomes an fi_mr
// (shared through the domain's cache) so descriptors can be passed on every
// provider, whatever its mr_mode asks for; GPU memory is registered with its
// HMEM interface and device, or from a dma-buf fd.
#pragma once

#include <cstdint>
#include <string>

#include "nccl/types.h"
#include "ofi/endpoint/registration.h"
#include "ofi/wire/rails.h"

namespace weft::ofi {

class Endpoint;

// NCCL's mhandle.
struct MemoryRegion {
  static constexpr uint32_t kMagic = 0x574d5247;  // "WMRG"
  uint32_t magic = kMagic;
  int type = NCCL_PTR_HOST;
  void* base = nullptr;
  size_t size = 0;
  void* descriptor = nullptr;  // copied from the registration for the data path
  RegistrationCache* cache = nullptr;
  RegistrationCache::Entry* entry = nullptr;  // shared registration, or
  Registration own;                           // one of its own (cache full or off)
  // A multi-rail comm registers the buffer on every rail's domain: the
  // handle NCCL holds is rail 0's, the others hang off it (MemoryRegion*).
  void* rail_region[kMaxRails] = {};

  const Registration& registration() const { return entry != nullptr ? entry->registration : own; }
};

// The handle's registration on `rail` (rail 0: the handle itself).
inline const MemoryRegion* region_on_rail(const void* mhandle, int rail) {
  auto* region = static_cast<const MemoryRegion*>(mhandle);
  if (region == nullptr || rail == 0) return region;
  return static_cast<const MemoryRegion*>(region->rail_region[rail]);
}

ncclResult_t register_memory(Endpoint& endpoint, void* data, size_t size, MemorySource source,
                             void** mhandle);
// Classifies `data` (host or CUDA, device, allocation) for register_memory.
ncclResult_t classify_memory(Endpoint& endpoint, void* data, size_t size, int type,
                             MemorySource* source);
// `endpoint` may be null for comms left to their endpoint, which deregister
// while it closes (single-threaded by then).
ncclResult_t deregister_memory(Endpoint* endpoint, const std::string& device_name, void* mhandle);

// Descriptor to pass with a data operation; nullptr for a NULL handle.
inline void* descriptor_of(const void* mhandle) {
  return mhandle == nullptr ? nullptr : static_cast<const MemoryRegion*>(mhandle)->descriptor;
}

// Whether the CPU may read the buffer: an inject copies it on the spot
// (no descriptor, so no provider copies it through CUDA), host memory only.
inline bool host_memory(const void* mhandle) {
  return mhandle == nullptr || static_cast<const MemoryRegion*>(mhandle)->type == NCCL_PTR_HOST;
}

}  // namespace weft::ofi
