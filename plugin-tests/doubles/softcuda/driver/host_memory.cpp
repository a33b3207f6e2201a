// Host memory the driver knows: pinned allocations and registered ranges.

#include <sys/mman.h>
#include <unistd.h>

#include <cstdlib>
#include <mutex>

#include "driver/api.h"
#include "driver/config.h"
#include "driver/contexts.h"
#include "driver/counters.h"
#include "driver/ranges.h"
#include "driver/trace.h"

using namespace softcuda;

SOFTCUDA_API CUresult cuMemHostAlloc(void** pp, size_t bytesize, unsigned int flags) {
  Trace t("cuMemHostAlloc", "bytesize=%zu, flags=0x%x", bytesize, flags);
  REQUIRE_INIT(t);
  if (pp == nullptr || bytesize == 0 ||
      (flags & ~unsigned{CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP |
                         CU_MEMHOSTALLOC_WRITECOMBINED}) != 0) {
    return t(CUDA_ERROR_INVALID_VALUE);
  }
  int dev = 0;
  CUresult r = current_device(&dev);
  if (r != CUDA_SUCCESS) return t(r);
  Range range;
  range.kind = Kind::HostAlloc;
  range.size = bytesize;
  range.mapped = round_up_pages(bytesize);
  range.device = dev;
  range.buffer_id = g_next_buffer_id.fetch_add(1);
  void* p = mmap(nullptr, range.mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return t(CUDA_ERROR_OUT_OF_MEMORY);
  range.base = reinterpret_cast<uintptr_t>(p);
  range.shadow = static_cast<char*>(p);
  {
    std::lock_guard<std::mutex> lock(g_mu);
    g_ranges[range.base] = range;
  }
  *pp = p;
  return t(CUDA_SUCCESS);
}

SOFTCUDA_API CUresult cuMemAllocHost_v2(void** pp, size_t bytesize) {
  return cuMemHostAlloc(pp, bytesize, 0);
}

SOFTCUDA_API CUresult cuMemAllocHost(void** pp, size_t bytesize) {
  return cuMemHostAlloc(pp, bytesize, 0);
}

SOFTCUDA_API CUresult cuMemFreeHost(void* p) {
  Trace t("cuMemFreeHost", "p=%p", p);
  REQUIRE_INIT(t);
  Range victim;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    auto it = g_ranges.find(reinterpret_cast<uintptr_t>(p));
    if (it == g_ranges.end() || it->second.kind != Kind::HostAlloc)
      return t(CUDA_ERROR_INVALID_VALUE);
    victim = it->second;
    g_ranges.erase(it);
  }
  unmap_range(victim);
  return t(CUDA_SUCCESS);
}

SOFTCUDA_API CUresult cuMemHostRegister_v2(void* p, size_t bytesize, unsigned int flags) {
  Trace t("cuMemHostRegister_v2", "p=%p, bytesize=%zu, flags=0x%x", p, bytesize, flags);
  REQUIRE_INIT(t);
  if (p == nullptr || bytesize == 0 ||
      (flags & ~unsigned{CU_MEMHOSTREGISTER_PORTABLE | CU_MEMHOSTREGISTER_DEVICEMAP |
                         CU_MEMHOSTREGISTER_IOMEMORY | CU_MEMHOSTREGISTER_READ_ONLY}) != 0) {
    return t(CUDA_ERROR_INVALID_VALUE);
  }
  int dev = 0;
  CUresult r = current_device(&dev);
  if (r != CUDA_SUCCESS) return t(r);
  Range range;
  range.kind = Kind::HostRegistered;
  range.base = reinterpret_cast<uintptr_t>(p);
  range.size = bytesize;
  range.shadow = static_cast<char*>(p);
  range.device = dev;
  range.buffer_id = g_next_buffer_id.fetch_add(1);
  std::lock_guard<std::mutex> lock(g_mu);
  if (overlaps_any(range.base, bytesize)) return t(CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED);
  g_ranges[range.base] = range;
  return t(CUDA_SUCCESS);
}

SOFTCUDA_API CUresult cuMemHostRegister(void* p, size_t bytesize, unsigned int flags) {
  return cuMemHostRegister_v2(p, bytesize, flags);
}

SOFTCUDA_API CUresult cuMemHostUnregister(void* p) {
  Trace t("cuMemHostUnregister", "p=%p", p);
  REQUIRE_INIT(t);
  std::lock_guard<std::mutex> lock(g_mu);
  auto it = g_ranges.find(reinterpret_cast<uintptr_t>(p));
  if (it == g_ranges.end() || it->second.kind != Kind::HostRegistered) {
    return t(CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED);
  }
  g_ranges.erase(it);
  return t(CUDA_SUCCESS);
}

SOFTCUDA_API CUresult cuMemHostGetDevicePointer_v2(CUdeviceptr* pdptr, void* p,
                                                   unsigned int flags) {
  Trace t("cuMemHostGetDevicePointer_v2", "p=%p, flags=%u", p, flags);
  REQUIRE_INIT(t);
  if (pdptr == nullptr || flags != 0) return t(CUDA_ERROR_INVALID_VALUE);
  std::lock_guard<std::mutex> lock(g_mu);
  const Range* r = find_range(reinterpret_cast<uintptr_t>(p));
  if (r == nullptr || r->is_device()) return t(CUDA_ERROR_INVALID_VALUE);
  *pdptr = reinterpret_cast<uintptr_t>(p);
  return t(CUDA_SUCCESS);
}

SOFTCUDA_API CUresult cuMemHostGetDevicePointer(CUdeviceptr* pdptr, void* p, unsigned int flags) {
  return cuMemHostGetDevicePointer_v2(pdptr, p, flags);
}
