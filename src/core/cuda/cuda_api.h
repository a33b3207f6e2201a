// Our own declarations of the small part of the CUDA driver API (cuda.h)
// that weft calls. The plugin never links libcuda and must build without a
// CUDA toolkit, so nothing here comes from <cuda.h>: the names follow
// cuda.h, the numeric values and signatures are those of CUDA 13.0 (stable
// ABI since they were introduced). Inside weft::cuda so that they cannot
// clash with a real cuda.h elsewhere in a program.
#pragma once

#include <cstddef>
#include <cstdint>

namespace weft::cuda {

using cuuint64_t = uint64_t;
using CUdevice = int;
using CUdeviceptr = unsigned long long;  // CUdeviceptr_v2 on 64-bit hosts
using CUcontext = struct CUctx_st*;

// Only the values weft names; the driver may return any other.
enum CUresult : int {
  CUDA_SUCCESS = 0,
  CUDA_ERROR_INVALID_VALUE = 1,
  CUDA_ERROR_OUT_OF_MEMORY = 2,
  CUDA_ERROR_NOT_INITIALIZED = 3,
  CUDA_ERROR_DEINITIALIZED = 4,
  CUDA_ERROR_NO_DEVICE = 100,
  CUDA_ERROR_INVALID_DEVICE = 101,
  CUDA_ERROR_INVALID_CONTEXT = 201,
  CUDA_ERROR_NOT_FOUND = 500,
  CUDA_ERROR_NOT_SUPPORTED = 801,
};

enum CUdevice_attribute : int {
  CU_DEVICE_ATTRIBUTE_PCI_BUS_ID = 33,
  CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID = 34,
  CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID = 50,
  CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_SUPPORTED = 116,
  CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED = 124,
};

enum CUpointer_attribute : int {
  CU_POINTER_ATTRIBUTE_CONTEXT = 1,
  CU_POINTER_ATTRIBUTE_MEMORY_TYPE = 2,        // unsigned int (CUmemorytype)
  CU_POINTER_ATTRIBUTE_SYNC_MEMOPS = 6,        // get: bool; set: unsigned int
  CU_POINTER_ATTRIBUTE_BUFFER_ID = 7,          // unsigned long long
  CU_POINTER_ATTRIBUTE_IS_MANAGED = 8,         // bool
  CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL = 9,     // int
  CU_POINTER_ATTRIBUTE_RANGE_START_ADDR = 11,  // CUdeviceptr
  CU_POINTER_ATTRIBUTE_RANGE_SIZE = 12,        // size_t
};

enum CUmemorytype : unsigned int {
  CU_MEMORYTYPE_HOST = 0x01,
  CU_MEMORYTYPE_DEVICE = 0x02,
  CU_MEMORYTYPE_ARRAY = 0x03,
  CU_MEMORYTYPE_UNIFIED = 0x04,
};

enum CUmemRangeHandleType : int {
  CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD = 0x1,
};

enum CUflushGPUDirectRDMAWritesTarget : int {
  CU_FLUSH_GPU_DIRECT_RDMA_WRITES_TARGET_CURRENT_CTX = 0,
};

enum CUflushGPUDirectRDMAWritesScope : int {
  CU_FLUSH_GPU_DIRECT_RDMA_WRITES_TO_OWNER = 100,
  CU_FLUSH_GPU_DIRECT_RDMA_WRITES_TO_ALL_DEVICES = 200,
};

// cuGetProcAddress flags (cuuint64_t): legacy default stream semantics.
constexpr cuuint64_t CU_GET_PROC_ADDRESS_DEFAULT = 0;

enum CUdriverProcAddressQueryResult : int {
  CU_GET_PROC_ADDRESS_SUCCESS = 0,
  CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND = 1,
  CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT = 2,
};

// Entry points. The two cuGetProcAddress forms are looked up with dlsym
// ("cuGetProcAddress_v2" from CUDA 12, "cuGetProcAddress" from 11.3); every
// other one through cuGetProcAddress by its base name, which picks the
// versioned ABI (cuMemAlloc -> cuMemAlloc_v2, ...) for the CUDA version asked.
using PFN_cuGetProcAddress_v2 = CUresult (*)(const char* symbol, void** pfn, int cuda_version,
                                             cuuint64_t flags,
                                             CUdriverProcAddressQueryResult* symbol_status);
using PFN_cuGetProcAddress_v1 = CUresult (*)(const char* symbol, void** pfn, int cuda_version,
                                             cuuint64_t flags);
using PFN_cuDriverGetVersion = CUresult (*)(int* version);
using PFN_cuGetErrorName = CUresult (*)(CUresult error, const char** name);
using PFN_cuInit = CUresult (*)(unsigned int flags);
using PFN_cuDeviceGetCount = CUresult (*)(int* count);
using PFN_cuDeviceGet = CUresult (*)(CUdevice* device, int ordinal);
using PFN_cuDeviceGetAttribute = CUresult (*)(int* value, CUdevice_attribute attribute,
                                              CUdevice device);
using PFN_cuPointerGetAttribute = CUresult (*)(void* data, CUpointer_attribute attribute,
                                               CUdeviceptr ptr);
using PFN_cuPointerGetAttributes = CUresult (*)(unsigned int count, CUpointer_attribute* attributes,
                                                void** data, CUdeviceptr ptr);
using PFN_cuPointerSetAttribute = CUresult (*)(const void* value, CUpointer_attribute attribute,
                                               CUdeviceptr ptr);
using PFN_cuMemGetHandleForAddressRange = CUresult (*)(void* handle, CUdeviceptr ptr, size_t size,
                                                       CUmemRangeHandleType type,
                                                       unsigned long long flags);
using PFN_cuFlushGPUDirectRDMAWrites = CUresult (*)(CUflushGPUDirectRDMAWritesTarget target,
                                                    CUflushGPUDirectRDMAWritesScope scope);
using PFN_cuCtxGetCurrent = CUresult (*)(CUcontext* context);
using PFN_cuCtxSetCurrent = CUresult (*)(CUcontext context);
using PFN_cuCtxGetDevice = CUresult (*)(CUdevice* device);
using PFN_cuDevicePrimaryCtxRetain = CUresult (*)(CUcontext* context, CUdevice device);
using PFN_cuDevicePrimaryCtxRelease = CUresult (*)(CUdevice device);  // the _v2 ABI
using PFN_cuMemAlloc = CUresult (*)(CUdeviceptr* ptr, size_t size);   // _v2
using PFN_cuMemFree = CUresult (*)(CUdeviceptr ptr);                  // _v2
using PFN_cuMemcpyHtoD = CUresult (*)(CUdeviceptr dst, const void* src, size_t size);  // _v2
using PFN_cuMemcpyDtoH = CUresult (*)(void* dst, CUdeviceptr src, size_t size);        // _v2

}  // namespace weft::cuda
