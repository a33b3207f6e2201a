// What an RDMA NIC needs from the driver: dma-buf handles of device memory
// and the flush of GPUDirect RDMA writes.

#include <fcntl.h>

#include <cstdio>
#include <mutex>

#include "driver/api.h"
#include "driver/config.h"
#include "driver/contexts.h"
#include "driver/counters.h"
#include "driver/ranges.h"
#include "driver/trace.h"

using namespace softcuda;

SOFTCUDA_API CUresult cuMemGetHandleForAddressRange(void* handle, CUdeviceptr dptr, size_t size,
                                                    CUmemRangeHandleType type,
                                                    unsigned long long flags) {
  Trace t("cuMemGetHandleForAddressRange", "dptr=0x%llx, size=%zu, type=%d, flags=0x%llx", dptr,
          size, static_cast<int>(type), flags);
  REQUIRE_INIT(t);
  if (handle == nullptr || type != CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD) {
    return t(CUDA_ERROR_INVALID_VALUE);
  }
  if (!dmabuf_supported()) return t(CUDA_ERROR_NOT_SUPPORTED);
  if (flags != 0 && flags != CU_MEM_RANGE_FLAG_DMA_BUF_MAPPING_TYPE_PCIE) {
    return t(CUDA_ERROR_INVALID_VALUE);
  }
  if (flags != 0 && !env_flag("SOFTCUDA_DMABUF_PCIE", true)) return t(CUDA_ERROR_NOT_SUPPORTED);
  // dptr and size must be aligned to the host page size.
  if (size == 0 || dptr % page_size() != 0 || size % page_size() != 0) {
    return t(CUDA_ERROR_INVALID_VALUE);
  }
  int fd = -1;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    const Range* r = find_range(dptr);
    // The whole range in one device allocation (its page-rounded mapping).
    if (r == nullptr || r->kind != Kind::Device || size > r->mapped - (dptr - r->base)) {
      return t(CUDA_ERROR_INVALID_VALUE);
    }
    fd = fcntl(r->fd, F_DUPFD_CLOEXEC, 0);
  }
  if (fd < 0) return t(CUDA_ERROR_OUT_OF_MEMORY);
  *static_cast<int*>(handle) = fd;
  g_dmabuf_exports.fetch_add(1);
  if (env_flag("SOFTCUDA_LOG", false)) std::fprintf(stderr, "softcuda:   -> dma-buf fd %d\n", fd);
  return t(CUDA_SUCCESS);
}

SOFTCUDA_API CUresult cuFlushGPUDirectRDMAWrites(CUflushGPUDirectRDMAWritesTarget target,
                                                 CUflushGPUDirectRDMAWritesScope scope) {
  Trace t("cuFlushGPUDirectRDMAWrites", "target=%d, scope=%d", static_cast<int>(target),
          static_cast<int>(scope));
  REQUIRE_INIT(t);
  int dev = 0;
  CUresult r = current_device(&dev);
  if (r != CUDA_SUCCESS) return t(r);
  if (target != CU_FLUSH_GPU_DIRECT_RDMA_WRITES_TARGET_CURRENT_CTX ||
      (scope != CU_FLUSH_GPU_DIRECT_RDMA_WRITES_TO_OWNER &&
       scope != CU_FLUSH_GPU_DIRECT_RDMA_WRITES_TO_ALL_DEVICES)) {
    return t(CUDA_ERROR_INVALID_VALUE);
  }
  if (!gdr_supported()) return t(CUDA_ERROR_NOT_SUPPORTED);
  g_flushes.fetch_add(1);
  return t(CUDA_SUCCESS);
}
