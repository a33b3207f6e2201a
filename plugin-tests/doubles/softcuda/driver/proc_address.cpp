// cuGetProcAddress: the table of every entry point it resolves, by base name,
// with the CUDA version that introduced the variant it returns.

#include <cstring>
#include <vector>

#include "cuda_abi.h"
#include "driver/api.h"
#include "driver/config.h"
#include "driver/trace.h"

using namespace softcuda;

SOFTCUDA_API CUresult cuGetProcAddress_v2(const char* symbol, void** pfn, int cuda_version,
                                          cuuint64_t flags, CUdriverProcAddressQueryResult* status);

namespace {
struct ProcEntry {
  const char* name;  // base name, as callers ask for it
  void* fn;          // the variant we resolve it to
  int since;         // the CUDA version that introduced that variant
};

template <typename F>
void* fn_ptr(F* f) {
  return reinterpret_cast<void*>(f);
}

const std::vector<ProcEntry>& proc_table() {
  static const std::vector<ProcEntry> table = {
      {"cuInit", fn_ptr(&cuInit), 2000},
      {"cuDriverGetVersion", fn_ptr(&cuDriverGetVersion), 2020},
      {"cuGetErrorString", fn_ptr(&cuGetErrorString), 6000},
      {"cuGetErrorName", fn_ptr(&cuGetErrorName), 6000},
      {"cuGetProcAddress", fn_ptr(&cuGetProcAddress_v2), 12000},
      {"cuDeviceGetCount", fn_ptr(&cuDeviceGetCount), 2000},
      {"cuDeviceGet", fn_ptr(&cuDeviceGet), 2000},
      {"cuDeviceGetName", fn_ptr(&cuDeviceGetName), 2000},
      {"cuDeviceGetPCIBusId", fn_ptr(&cuDeviceGetPCIBusId), 4010},
      {"cuDeviceGetUuid", fn_ptr(&cuDeviceGetUuid_v2), 11040},
      {"cuDeviceTotalMem", fn_ptr(&cuDeviceTotalMem_v2), 3020},
      {"cuDeviceGetAttribute", fn_ptr(&cuDeviceGetAttribute), 2000},
      {"cuDeviceCanAccessPeer", fn_ptr(&cuDeviceCanAccessPeer), 4000},
      {"cuDevicePrimaryCtxRetain", fn_ptr(&cuDevicePrimaryCtxRetain), 7000},
      {"cuDevicePrimaryCtxRelease", fn_ptr(&cuDevicePrimaryCtxRelease_v2), 11000},
      {"cuDevicePrimaryCtxGetState", fn_ptr(&cuDevicePrimaryCtxGetState), 7000},
      {"cuCtxGetCurrent", fn_ptr(&cuCtxGetCurrent), 4000},
      {"cuCtxSetCurrent", fn_ptr(&cuCtxSetCurrent), 4000},
      {"cuCtxPushCurrent", fn_ptr(&cuCtxPushCurrent_v2), 4000},
      {"cuCtxPopCurrent", fn_ptr(&cuCtxPopCurrent_v2), 4000},
      {"cuCtxGetDevice", fn_ptr(&cuCtxGetDevice), 2000},
      {"cuCtxSynchronize", fn_ptr(&cuCtxSynchronize), 2000},
      {"cuMemAlloc", fn_ptr(&cuMemAlloc_v2), 3020},
      {"cuMemFree", fn_ptr(&cuMemFree_v2), 3020},
      {"cuMemGetAddressRange", fn_ptr(&cuMemGetAddressRange_v2), 3020},
      {"cuMemGetInfo", fn_ptr(&cuMemGetInfo_v2), 3020},
      {"cuMemcpy", fn_ptr(&cuMemcpy), 4000},
      {"cuMemcpyAsync", fn_ptr(&cuMemcpyAsync), 4000},
      {"cuMemcpyHtoD", fn_ptr(&cuMemcpyHtoD_v2), 3020},
      {"cuMemcpyDtoH", fn_ptr(&cuMemcpyDtoH_v2), 3020},
      {"cuMemcpyDtoD", fn_ptr(&cuMemcpyDtoD_v2), 3020},
      {"cuMemcpyHtoDAsync", fn_ptr(&cuMemcpyHtoDAsync_v2), 3020},
      {"cuMemcpyDtoHAsync", fn_ptr(&cuMemcpyDtoHAsync_v2), 3020},
      {"cuMemcpyDtoDAsync", fn_ptr(&cuMemcpyDtoDAsync_v2), 3020},
      {"cuMemsetD8", fn_ptr(&cuMemsetD8_v2), 3020},
      {"cuMemAllocHost", fn_ptr(&cuMemAllocHost_v2), 3020},
      {"cuMemHostAlloc", fn_ptr(&cuMemHostAlloc), 2020},
      {"cuMemFreeHost", fn_ptr(&cuMemFreeHost), 2000},
      {"cuMemHostRegister", fn_ptr(&cuMemHostRegister_v2), 6050},
      {"cuMemHostUnregister", fn_ptr(&cuMemHostUnregister), 4000},
      {"cuMemHostGetDevicePointer", fn_ptr(&cuMemHostGetDevicePointer_v2), 3020},
      {"cuPointerGetAttribute", fn_ptr(&cuPointerGetAttribute), 4000},
      {"cuPointerGetAttributes", fn_ptr(&cuPointerGetAttributes), 7000},
      {"cuPointerSetAttribute", fn_ptr(&cuPointerSetAttribute), 6000},
      {"cuMemGetHandleForAddressRange", fn_ptr(&cuMemGetHandleForAddressRange), 11070},
      {"cuFlushGPUDirectRDMAWrites", fn_ptr(&cuFlushGPUDirectRDMAWrites), 11030},
      {"cuIpcGetMemHandle", fn_ptr(&cuIpcGetMemHandle), 4010},
      {"cuIpcOpenMemHandle", fn_ptr(&cuIpcOpenMemHandle_v2), 11000},
      {"cuIpcCloseMemHandle", fn_ptr(&cuIpcCloseMemHandle), 4010},
      {"cuStreamCreate", fn_ptr(&cuStreamCreate), 2000},
      {"cuStreamDestroy", fn_ptr(&cuStreamDestroy_v2), 4000},
      {"cuStreamSynchronize", fn_ptr(&cuStreamSynchronize), 2000},
      {"cuStreamQuery", fn_ptr(&cuStreamQuery), 2000},
      {"cuEventCreate", fn_ptr(&cuEventCreate), 2000},
      {"cuEventDestroy", fn_ptr(&cuEventDestroy_v2), 4000},
      {"cuEventRecord", fn_ptr(&cuEventRecord), 2000},
      {"cuEventSynchronize", fn_ptr(&cuEventSynchronize), 2000},
      {"cuEventQuery", fn_ptr(&cuEventQuery), 2000},
  };
  return table;
}

// Shared by both entry points: fills *pfn and *status, returns the CUresult the
// v2 (CUDA 12+) entry point reports.
CUresult lookup_proc(const char* symbol, void** pfn, int cuda_version, cuuint64_t flags,
                     CUdriverProcAddressQueryResult* status) {
  constexpr cuuint64_t kKnownFlags =
      CU_GET_PROC_ADDRESS_LEGACY_STREAM | CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM;
  if (symbol == nullptr || pfn == nullptr || (flags & ~kKnownFlags) != 0 ||
      cuda_version > driver_version()) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  *pfn = nullptr;
  *status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  for (const ProcEntry& e : proc_table()) {
    if (std::strcmp(e.name, symbol) != 0) continue;
    if (cuda_version < e.since) {
      *status = CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT;
    } else {
      *pfn = e.fn;
      *status = CU_GET_PROC_ADDRESS_SUCCESS;
    }
    break;
  }
  return CUDA_SUCCESS;
}
}  // namespace

// CUDA 12+: "not found" is CUDA_SUCCESS with *pfn = NULL and the reason in
// *symbolStatus (as documented in the CUDA 13.0 cuda.h).
SOFTCUDA_API CUresult cuGetProcAddress_v2(const char* symbol, void** pfn, int cuda_version,
                                          cuuint64_t flags,
                                          CUdriverProcAddressQueryResult* status) {
  Trace t("cuGetProcAddress_v2", "symbol=%s, cudaVersion=%d, flags=%llu",
          symbol != nullptr ? symbol : "(null)", cuda_version,
          static_cast<unsigned long long>(flags));
  CUdriverProcAddressQueryResult local = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  CUresult r = lookup_proc(symbol, pfn, cuda_version, flags, &local);
  if (status != nullptr) *status = local;
  return t(r);
}

// The CUDA 11.3 signature, without a status: an unknown symbol is
// CUDA_ERROR_NOT_FOUND.
SOFTCUDA_API CUresult cuGetProcAddress(const char* symbol, void** pfn, int cuda_version,
                                       cuuint64_t flags) {
  Trace t("cuGetProcAddress", "symbol=%s, cudaVersion=%d, flags=%llu",
          symbol != nullptr ? symbol : "(null)", cuda_version,
          static_cast<unsigned long long>(flags));
  CUdriverProcAddressQueryResult status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  CUresult r = lookup_proc(symbol, pfn, cuda_version, flags, &status);
  if (r != CUDA_SUCCESS) return t(r);
  return t(status == CU_GET_PROC_ADDRESS_SUCCESS ? CUDA_SUCCESS : CUDA_ERROR_NOT_FOUND);
}
