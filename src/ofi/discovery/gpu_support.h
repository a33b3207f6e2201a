// Whether a libfabric device can carry GPU memory, found out rather than
// assumed: the provider must offer FI_HMEM for CUDA, a registration of a
// real device buffer must succeed (and of a dma-buf for DMABUF), and the
// provider must promise not to call CUDA itself. Also picks how iflush is
// done on the device.
#pragma once

#include <string>

#include "core/flush_method.h"
#include "ofi/discovery/provider_discovery.h"
#include "weft/params.h"

namespace weft::cuda {
class Driver;
}

namespace weft::ofi {

struct GpuSupport {
  bool cuda = false;    // NCCL_PTR_CUDA registration works
  bool dmabuf = false;  // NCCL_PTR_DMABUF registration works
  FlushMethod flush = FlushMethod::None;
  std::string off_reason;  // why GPU memory cannot be registered, for errors
};

// With a driver, swaps device->info for the provider's FI_HMEM variant of
// the same domain (with FI_RMA for flush reads where offered), probes it,
// and updates device->properties (ptrSupport, regIsGlobal, forceFlush).
// Without one, or when the probes fail, the device stays host-only; the
// reason is logged once at INFO and kept in off_reason.
GpuSupport enable_gpu_memory(DiscoveredDevice* device, const cuda::Driver* driver,
                             const Params& params);

}  // namespace weft::ofi
