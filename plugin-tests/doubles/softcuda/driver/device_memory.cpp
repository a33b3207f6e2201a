// Device memory: one memfd per allocation, mapped MAP_SHARED and rounded up
// to whole pages.

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <mutex>

#include "driver/api.h"
#include "driver/config.h"
#include "driver/contexts.h"
#include "driver/counters.h"
#include "driver/ranges.h"
#include "driver/trace.h"

using namespace softcuda;

SOFTCUDA_API CUresult cuMemAlloc_v2(CUdeviceptr* dptr, size_t bytesize) {
  Trace t("cuMemAlloc_v2", "bytesize=%zu", bytesize);
  REQUIRE_INIT(t);
  if (dptr == nullptr || bytesize == 0) return t(CUDA_ERROR_INVALID_VALUE);
  int dev = 0;
  CUresult r = current_device(&dev);
  if (r != CUDA_SUCCESS) return t(r);

  Range range;
  range.kind = Kind::Device;
  range.size = bytesize;
  range.mapped = round_up_pages(bytesize);
  range.device = dev;
  range.buffer_id = g_next_buffer_id.fetch_add(1);
  char name[64];
  std::snprintf(name, sizeof(name), "softcuda-dev%d-buf%llu", dev, range.buffer_id);
  range.fd = memfd_create(name, MFD_CLOEXEC);
  if (range.fd < 0) return t(CUDA_ERROR_OUT_OF_MEMORY);
  if (ftruncate(range.fd, static_cast<off_t>(range.mapped)) != 0) {
    close(range.fd);
    return t(CUDA_ERROR_OUT_OF_MEMORY);
  }
  if (map_fd(range.fd, range.mapped, &range.base, &range.shadow) != CUDA_SUCCESS) {
    close(range.fd);
    return t(CUDA_ERROR_OUT_OF_MEMORY);
  }
  {
    std::lock_guard<std::mutex> lock(g_mu);
    g_ranges[range.base] = range;
  }
  g_total_allocations.fetch_add(1);
  *dptr = range.base;
  if (env_flag("SOFTCUDA_LOG", false)) {
    std::fprintf(stderr, "softcuda:   -> dptr=0x%llx (fd %d, buffer id %llu)\n",
                 static_cast<unsigned long long>(range.base), range.fd, range.buffer_id);
  }
  return t(CUDA_SUCCESS);
}

SOFTCUDA_API CUresult cuMemAlloc(CUdeviceptr* dptr, size_t bytesize) {
  return cuMemAlloc_v2(dptr, bytesize);
}

SOFTCUDA_API CUresult cuMemFree_v2(CUdeviceptr dptr) {
  Trace t("cuMemFree_v2", "dptr=0x%llx", dptr);
  REQUIRE_INIT(t);
  Range victim;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    auto it = g_ranges.find(dptr);
    if (it == g_ranges.end() || it->second.kind != Kind::Device) return t(CUDA_ERROR_INVALID_VALUE);
    victim = it->second;
    g_ranges.erase(it);
  }
  unmap_range(victim);
  return t(CUDA_SUCCESS);
}

SOFTCUDA_API CUresult cuMemFree(CUdeviceptr dptr) {
  return cuMemFree_v2(dptr);
}

SOFTCUDA_API CUresult cuMemGetAddressRange_v2(CUdeviceptr* pbase, size_t* psize, CUdeviceptr dptr) {
  Trace t("cuMemGetAddressRange_v2", "dptr=0x%llx", dptr);
  REQUIRE_INIT(t);
  std::lock_guard<std::mutex> lock(g_mu);
  const Range* r = find_range(dptr);
  if (r == nullptr || !r->is_device()) return t(CUDA_ERROR_NOT_FOUND);
  if (pbase != nullptr) *pbase = r->base;
  if (psize != nullptr) *psize = r->size;
  return t(CUDA_SUCCESS);
}

SOFTCUDA_API CUresult cuMemGetAddressRange(CUdeviceptr* pbase, size_t* psize, CUdeviceptr dptr) {
  return cuMemGetAddressRange_v2(pbase, psize, dptr);
}

SOFTCUDA_API CUresult cuMemGetInfo_v2(size_t* free_bytes, size_t* total_bytes) {
  Trace t("cuMemGetInfo_v2");
  REQUIRE_INIT(t);
  int dev = 0;
  CUresult r = current_device(&dev);
  if (r != CUDA_SUCCESS) return t(r);
  if (free_bytes == nullptr || total_bytes == nullptr) return t(CUDA_ERROR_INVALID_VALUE);
  size_t used = 0;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    for (const auto& [base, range] : g_ranges) {
      if (range.kind == Kind::Device && range.device == dev) used += range.mapped;
    }
  }
  *total_bytes = size_t{80} << 30;
  *free_bytes = *total_bytes > used ? *total_bytes - used : 0;
  return t(CUDA_SUCCESS);
}

SOFTCUDA_API CUresult cuMemGetInfo(size_t* free_bytes, size_t* total_bytes) {
  return cuMemGetInfo_v2(free_bytes, total_bytes);
}
