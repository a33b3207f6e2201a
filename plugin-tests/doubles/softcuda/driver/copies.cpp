// Copies and memset: synchronous, through the host-accessible alias of each
// range.

#include <cstring>
#include <mutex>

#include "driver/api.h"
#include "driver/counters.h"
#include "driver/init.h"
#include "driver/ranges.h"
#include "driver/streams.h"
#include "driver/trace.h"

namespace softcuda {

namespace {

enum class Side { Device, Host, Any };

CUresult do_copy(uintptr_t dst, Side dst_side, uintptr_t src, Side src_side, size_t n) {
  if (!initialized()) return CUDA_ERROR_NOT_INITIALIZED;
  if (n == 0) return CUDA_SUCCESS;
  char* d = nullptr;
  const char* s = nullptr;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    char* tmp = nullptr;
    CUresult r = resolve(dst, n, dst_side != Side::Device, &tmp);
    if (r != CUDA_SUCCESS) return r;
    d = tmp;
    r = resolve(src, n, src_side != Side::Device, &tmp);
    if (r != CUDA_SUCCESS) return r;
    s = tmp;
  }
  std::memmove(d, s, n);
  g_memcpy_count.fetch_add(1);
  g_memcpy_bytes.fetch_add(n);
  return CUDA_SUCCESS;
}

}  // namespace

}  // namespace softcuda

using namespace softcuda;

SOFTCUDA_API CUresult cuMemcpy(CUdeviceptr dst, CUdeviceptr src, size_t n) {
  Trace t("cuMemcpy", "dst=0x%llx, src=0x%llx, n=%zu", dst, src, n);
  return t(do_copy(dst, Side::Any, src, Side::Any, n));
}

SOFTCUDA_API CUresult cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream stream) {
  Trace t("cuMemcpyAsync", "dst=0x%llx, src=0x%llx, n=%zu, stream=%p", dst, src, n,
          static_cast<void*>(stream));
  if (!valid_stream(stream)) return t(CUDA_ERROR_INVALID_HANDLE);
  return t(do_copy(dst, Side::Any, src, Side::Any, n));
}

SOFTCUDA_API CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void* src, size_t n) {
  Trace t("cuMemcpyHtoD_v2", "dst=0x%llx, src=%p, n=%zu", dst, src, n);
  return t(do_copy(dst, Side::Device, reinterpret_cast<uintptr_t>(src), Side::Host, n));
}

SOFTCUDA_API CUresult cuMemcpyHtoD(CUdeviceptr dst, const void* src, size_t n) {
  return cuMemcpyHtoD_v2(dst, src, n);
}

SOFTCUDA_API CUresult cuMemcpyDtoH_v2(void* dst, CUdeviceptr src, size_t n) {
  Trace t("cuMemcpyDtoH_v2", "dst=%p, src=0x%llx, n=%zu", dst, src, n);
  return t(do_copy(reinterpret_cast<uintptr_t>(dst), Side::Host, src, Side::Device, n));
}

SOFTCUDA_API CUresult cuMemcpyDtoH(void* dst, CUdeviceptr src, size_t n) {
  return cuMemcpyDtoH_v2(dst, src, n);
}

SOFTCUDA_API CUresult cuMemcpyDtoD_v2(CUdeviceptr dst, CUdeviceptr src, size_t n) {
  Trace t("cuMemcpyDtoD_v2", "dst=0x%llx, src=0x%llx, n=%zu", dst, src, n);
  return t(do_copy(dst, Side::Device, src, Side::Device, n));
}

SOFTCUDA_API CUresult cuMemcpyDtoD(CUdeviceptr dst, CUdeviceptr src, size_t n) {
  return cuMemcpyDtoD_v2(dst, src, n);
}

SOFTCUDA_API CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void* src, size_t n,
                                           CUstream stream) {
  Trace t("cuMemcpyHtoDAsync_v2", "dst=0x%llx, src=%p, n=%zu", dst, src, n);
  if (!valid_stream(stream)) return t(CUDA_ERROR_INVALID_HANDLE);
  return t(do_copy(dst, Side::Device, reinterpret_cast<uintptr_t>(src), Side::Host, n));
}

SOFTCUDA_API CUresult cuMemcpyHtoDAsync(CUdeviceptr dst, const void* src, size_t n,
                                        CUstream stream) {
  return cuMemcpyHtoDAsync_v2(dst, src, n, stream);
}

SOFTCUDA_API CUresult cuMemcpyDtoHAsync_v2(void* dst, CUdeviceptr src, size_t n, CUstream stream) {
  Trace t("cuMemcpyDtoHAsync_v2", "dst=%p, src=0x%llx, n=%zu", dst, src, n);
  if (!valid_stream(stream)) return t(CUDA_ERROR_INVALID_HANDLE);
  return t(do_copy(reinterpret_cast<uintptr_t>(dst), Side::Host, src, Side::Device, n));
}

SOFTCUDA_API CUresult cuMemcpyDtoHAsync(void* dst, CUdeviceptr src, size_t n, CUstream stream) {
  return cuMemcpyDtoHAsync_v2(dst, src, n, stream);
}

SOFTCUDA_API CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr dst, CUdeviceptr src, size_t n,
                                           CUstream stream) {
  Trace t("cuMemcpyDtoDAsync_v2", "dst=0x%llx, src=0x%llx, n=%zu", dst, src, n);
  if (!valid_stream(stream)) return t(CUDA_ERROR_INVALID_HANDLE);
  return t(do_copy(dst, Side::Device, src, Side::Device, n));
}

SOFTCUDA_API CUresult cuMemcpyDtoDAsync(CUdeviceptr dst, CUdeviceptr src, size_t n,
                                        CUstream stream) {
  return cuMemcpyDtoDAsync_v2(dst, src, n, stream);
}

SOFTCUDA_API CUresult cuMemsetD8_v2(CUdeviceptr dst, unsigned char value, size_t n) {
  Trace t("cuMemsetD8_v2", "dst=0x%llx, value=%u, n=%zu", dst, value, n);
  REQUIRE_INIT(t);
  if (n == 0) return t(CUDA_SUCCESS);
  char* d = nullptr;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    CUresult r = resolve(dst, n, false, &d);
    if (r != CUDA_SUCCESS) return t(r);
  }
  std::memset(d, value, n);
  return t(CUDA_SUCCESS);
}

SOFTCUDA_API CUresult cuMemsetD8(CUdeviceptr dst, unsigned char value, size_t n) {
  return cuMemsetD8_v2(dst, value, n);
}
