// softcuda's own declarations of the parts of the CUDA driver (cuda.h) and
// runtime (cuda_runtime_api.h, driver_types.h) ABI that the doubles
// implement. Written by hand so that the fixture builds without a CUDA
// toolkit; the numeric values and signatures are those of CUDA 13.0.
//
// Internal to plugin-tests/doubles/softcuda (the doubles and their own test). Tests
// of weft include softcuda.h instead, which declares no CUDA types, so that it
// can sit next to whatever CUDA declarations the code under test uses.
#pragma once

#include <cstddef>
#include <cstdint>

extern "C" {

// ---------------------------------------------------------------- driver --
typedef uint32_t cuuint32_t;
typedef uint64_t cuuint64_t;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;  // CUdeviceptr_v2 on 64-bit hosts
typedef struct CUctx_st* CUcontext;
typedef struct CUstream_st* CUstream;
typedef struct CUevent_st* CUevent;

typedef struct CUuuid_st {
  char bytes[16];
} CUuuid;

#define CU_IPC_HANDLE_SIZE 64
typedef struct CUipcMemHandle_st {
  char reserved[CU_IPC_HANDLE_SIZE];
} CUipcMemHandle;

typedef enum cudaError_enum {
  CUDA_SUCCESS = 0,
  CUDA_ERROR_INVALID_VALUE = 1,
  CUDA_ERROR_OUT_OF_MEMORY = 2,
  CUDA_ERROR_NOT_INITIALIZED = 3,
  CUDA_ERROR_DEINITIALIZED = 4,
  CUDA_ERROR_NO_DEVICE = 100,
  CUDA_ERROR_INVALID_DEVICE = 101,
  CUDA_ERROR_INVALID_CONTEXT = 201,
  CUDA_ERROR_MAP_FAILED = 205,
  CUDA_ERROR_ALREADY_MAPPED = 208,
  CUDA_ERROR_PEER_ACCESS_UNSUPPORTED = 217,
  CUDA_ERROR_OPERATING_SYSTEM = 304,
  CUDA_ERROR_INVALID_HANDLE = 400,
  CUDA_ERROR_NOT_FOUND = 500,
  CUDA_ERROR_NOT_READY = 600,
  CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED = 712,
  CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED = 713,
  CUDA_ERROR_NOT_PERMITTED = 800,
  CUDA_ERROR_NOT_SUPPORTED = 801,
  CUDA_ERROR_UNKNOWN = 999
} CUresult;

typedef enum CUdevice_attribute_enum {
  CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK = 1,
  CU_DEVICE_ATTRIBUTE_WARP_SIZE = 10,
  CU_DEVICE_ATTRIBUTE_CLOCK_RATE = 13,
  CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16,
  CU_DEVICE_ATTRIBUTE_INTEGRATED = 18,
  CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY = 19,
  CU_DEVICE_ATTRIBUTE_COMPUTE_MODE = 20,
  CU_DEVICE_ATTRIBUTE_CONCURRENT_KERNELS = 31,
  CU_DEVICE_ATTRIBUTE_ECC_ENABLED = 32,
  CU_DEVICE_ATTRIBUTE_PCI_BUS_ID = 33,
  CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID = 34,
  CU_DEVICE_ATTRIBUTE_TCC_DRIVER = 35,
  CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT = 40,
  CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING = 41,
  CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID = 50,
  CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75,
  CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76,
  CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY = 83,
  CU_DEVICE_ATTRIBUTE_CAN_FLUSH_REMOTE_WRITES = 98,
  CU_DEVICE_ATTRIBUTE_HOST_REGISTER_SUPPORTED = 99,
  CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED = 102,
  CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED = 103,
  CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED = 110,
  CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED = 115,
  CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_SUPPORTED = 116,
  CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_FLUSH_WRITES_OPTIONS = 117,
  CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WRITES_ORDERING = 118,
  CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED = 124,
  CU_DEVICE_ATTRIBUTE_IPC_EVENT_SUPPORTED = 125,
  CU_DEVICE_ATTRIBUTE_HOST_ALLOC_DMA_BUF_SUPPORTED = 146,
} CUdevice_attribute;

typedef enum CUpointer_attribute_enum {
  CU_POINTER_ATTRIBUTE_CONTEXT = 1,
  CU_POINTER_ATTRIBUTE_MEMORY_TYPE = 2,
  CU_POINTER_ATTRIBUTE_DEVICE_POINTER = 3,
  CU_POINTER_ATTRIBUTE_HOST_POINTER = 4,
  CU_POINTER_ATTRIBUTE_P2P_TOKENS = 5,
  CU_POINTER_ATTRIBUTE_SYNC_MEMOPS = 6,
  CU_POINTER_ATTRIBUTE_BUFFER_ID = 7,
  CU_POINTER_ATTRIBUTE_IS_MANAGED = 8,
  CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL = 9,
  CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE = 10,
  CU_POINTER_ATTRIBUTE_RANGE_START_ADDR = 11,
  CU_POINTER_ATTRIBUTE_RANGE_SIZE = 12,
  CU_POINTER_ATTRIBUTE_MAPPED = 13,
  CU_POINTER_ATTRIBUTE_ALLOWED_HANDLE_TYPES = 14,
  CU_POINTER_ATTRIBUTE_IS_GPU_DIRECT_RDMA_CAPABLE = 15,
} CUpointer_attribute;

typedef enum CUmemorytype_enum {
  CU_MEMORYTYPE_HOST = 0x01,
  CU_MEMORYTYPE_DEVICE = 0x02,
  CU_MEMORYTYPE_ARRAY = 0x03,
  CU_MEMORYTYPE_UNIFIED = 0x04
} CUmemorytype;

typedef enum CUmemRangeHandleType_enum {
  CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD = 0x1,
  CU_MEM_RANGE_HANDLE_TYPE_MAX = 0x7FFFFFFF
} CUmemRangeHandleType;

typedef enum CUmemRangeFlags_enum {
  CU_MEM_RANGE_FLAG_DMA_BUF_MAPPING_TYPE_PCIE = 0x1
} CUmemRangeFlags;

typedef enum CUflushGPUDirectRDMAWritesOptions_enum {
  CU_FLUSH_GPU_DIRECT_RDMA_WRITES_OPTION_HOST = 1 << 0,
  CU_FLUSH_GPU_DIRECT_RDMA_WRITES_OPTION_MEMOPS = 1 << 1
} CUflushGPUDirectRDMAWritesOptions;

typedef enum CUGPUDirectRDMAWritesOrdering_enum {
  CU_GPU_DIRECT_RDMA_WRITES_ORDERING_NONE = 0,
  CU_GPU_DIRECT_RDMA_WRITES_ORDERING_OWNER = 100,
  CU_GPU_DIRECT_RDMA_WRITES_ORDERING_ALL_DEVICES = 200
} CUGPUDirectRDMAWritesOrdering;

typedef enum CUflushGPUDirectRDMAWritesScope_enum {
  CU_FLUSH_GPU_DIRECT_RDMA_WRITES_TO_OWNER = 100,
  CU_FLUSH_GPU_DIRECT_RDMA_WRITES_TO_ALL_DEVICES = 200
} CUflushGPUDirectRDMAWritesScope;

typedef enum CUflushGPUDirectRDMAWritesTarget_enum {
  CU_FLUSH_GPU_DIRECT_RDMA_WRITES_TARGET_CURRENT_CTX = 0
} CUflushGPUDirectRDMAWritesTarget;

typedef enum CUdriverProcAddress_flags_enum {
  CU_GET_PROC_ADDRESS_DEFAULT = 0,
  CU_GET_PROC_ADDRESS_LEGACY_STREAM = 1 << 0,
  CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM = 1 << 1
} CUdriverProcAddress_flags;

typedef enum CUdriverProcAddressQueryResult_enum {
  CU_GET_PROC_ADDRESS_SUCCESS = 0,
  CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND = 1,
  CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT = 2
} CUdriverProcAddressQueryResult;

typedef enum CUipcMem_flags_enum { CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS = 0x1 } CUipcMem_flags;

#define CU_MEMHOSTALLOC_PORTABLE 0x01
#define CU_MEMHOSTALLOC_DEVICEMAP 0x02
#define CU_MEMHOSTALLOC_WRITECOMBINED 0x04
#define CU_MEMHOSTREGISTER_PORTABLE 0x01
#define CU_MEMHOSTREGISTER_DEVICEMAP 0x02
#define CU_MEMHOSTREGISTER_IOMEMORY 0x04
#define CU_MEMHOSTREGISTER_READ_ONLY 0x08

// --------------------------------------------------------------- runtime --
typedef enum cudaError {
  cudaSuccess = 0,
  cudaErrorInvalidValue = 1,
  cudaErrorMemoryAllocation = 2,
  cudaErrorInitializationError = 3,
  cudaErrorInvalidDevicePointer = 17,
  cudaErrorInvalidMemcpyDirection = 21,
  cudaErrorInsufficientDriver = 35,
  cudaErrorNoDevice = 100,
  cudaErrorInvalidDevice = 101,
  cudaErrorDeviceUninitialized = 201,
  cudaErrorMapBufferObjectFailed = 205,
  cudaErrorAlreadyMapped = 208,
  cudaErrorPeerAccessUnsupported = 217,
  cudaErrorOperatingSystem = 304,
  cudaErrorInvalidResourceHandle = 400,
  cudaErrorSymbolNotFound = 500,
  cudaErrorNotReady = 600,
  cudaErrorHostMemoryAlreadyRegistered = 712,
  cudaErrorHostMemoryNotRegistered = 713,
  cudaErrorNotPermitted = 800,
  cudaErrorNotSupported = 801,
  cudaErrorUnknown = 999
} cudaError_t;

enum cudaMemcpyKind {
  cudaMemcpyHostToHost = 0,
  cudaMemcpyHostToDevice = 1,
  cudaMemcpyDeviceToHost = 2,
  cudaMemcpyDeviceToDevice = 3,
  cudaMemcpyDefault = 4
};

enum cudaMemoryType {
  cudaMemoryTypeUnregistered = 0,
  cudaMemoryTypeHost = 1,
  cudaMemoryTypeDevice = 2,
  cudaMemoryTypeManaged = 3
};

struct cudaPointerAttributes {
  enum cudaMemoryType type;
  int device;
  void* devicePointer;
  void* hostPointer;
  long reserved[8];
};

#define CUDA_IPC_HANDLE_SIZE 64
typedef struct cudaIpcMemHandle_st {
  char reserved[CUDA_IPC_HANDLE_SIZE];
} cudaIpcMemHandle_t;

typedef struct CUstream_st* cudaStream_t;

#define cudaHostAllocDefault 0x00
#define cudaHostAllocPortable 0x01
#define cudaHostAllocMapped 0x02
#define cudaHostAllocWriteCombined 0x04
#define cudaHostRegisterDefault 0x00
#define cudaHostRegisterPortable 0x01
#define cudaHostRegisterMapped 0x02
#define cudaHostRegisterIoMemory 0x04
#define cudaHostRegisterReadOnly 0x08
#define cudaIpcMemLazyEnablePeerAccess 0x01

// ------------------------------------------------------------ prototypes --
// Every CUDA function the doubles export, with the signature they implement
// (for the plain names of _v2 functions: the _v2 signature, see driver/api.h).
#define SOFTCUDA_DECL __attribute__((visibility("default")))

// libcuda.so.1
SOFTCUDA_DECL CUresult cuInit(unsigned int flags);
SOFTCUDA_DECL CUresult cuDriverGetVersion(int* version);
SOFTCUDA_DECL CUresult cuGetErrorString(CUresult error, const char** str);
SOFTCUDA_DECL CUresult cuGetErrorName(CUresult error, const char** str);
SOFTCUDA_DECL CUresult cuDeviceGetCount(int* count);
SOFTCUDA_DECL CUresult cuDeviceGet(CUdevice* device, int ordinal);
SOFTCUDA_DECL CUresult cuDeviceGetName(char* name, int len, CUdevice dev);
SOFTCUDA_DECL CUresult cuDeviceGetPCIBusId(char* bus_id, int len, CUdevice dev);
SOFTCUDA_DECL CUresult cuDeviceGetUuid_v2(CUuuid* uuid, CUdevice dev);
SOFTCUDA_DECL CUresult cuDeviceGetUuid(CUuuid* uuid, CUdevice dev);
SOFTCUDA_DECL CUresult cuDeviceTotalMem_v2(size_t* bytes, CUdevice dev);
SOFTCUDA_DECL CUresult cuDeviceTotalMem(size_t* bytes, CUdevice dev);
SOFTCUDA_DECL CUresult cuDeviceGetAttribute(int* value, CUdevice_attribute attrib, CUdevice dev);
SOFTCUDA_DECL CUresult cuDeviceCanAccessPeer(int* can_access, CUdevice dev, CUdevice peer);
SOFTCUDA_DECL CUresult cuDevicePrimaryCtxRetain(CUcontext* ctx, CUdevice dev);
SOFTCUDA_DECL CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev);
SOFTCUDA_DECL CUresult cuDevicePrimaryCtxRelease(CUdevice dev);
SOFTCUDA_DECL CUresult cuDevicePrimaryCtxGetState(CUdevice dev, unsigned int* flags, int* active);
SOFTCUDA_DECL CUresult cuCtxGetCurrent(CUcontext* ctx);
SOFTCUDA_DECL CUresult cuCtxSetCurrent(CUcontext ctx);
SOFTCUDA_DECL CUresult cuCtxPushCurrent_v2(CUcontext ctx);
SOFTCUDA_DECL CUresult cuCtxPushCurrent(CUcontext ctx);
SOFTCUDA_DECL CUresult cuCtxPopCurrent_v2(CUcontext* ctx);
SOFTCUDA_DECL CUresult cuCtxPopCurrent(CUcontext* ctx);
SOFTCUDA_DECL CUresult cuCtxGetDevice(CUdevice* device);
SOFTCUDA_DECL CUresult cuCtxSynchronize(void);
SOFTCUDA_DECL CUresult cuMemAlloc_v2(CUdeviceptr* dptr, size_t bytesize);
SOFTCUDA_DECL CUresult cuMemAlloc(CUdeviceptr* dptr, size_t bytesize);
SOFTCUDA_DECL CUresult cuMemFree_v2(CUdeviceptr dptr);
SOFTCUDA_DECL CUresult cuMemFree(CUdeviceptr dptr);
SOFTCUDA_DECL CUresult cuMemGetAddressRange_v2(CUdeviceptr* pbase, size_t* psize, CUdeviceptr dptr);
SOFTCUDA_DECL CUresult cuMemGetAddressRange(CUdeviceptr* pbase, size_t* psize, CUdeviceptr dptr);
SOFTCUDA_DECL CUresult cuMemGetInfo_v2(size_t* free_bytes, size_t* total_bytes);
SOFTCUDA_DECL CUresult cuMemGetInfo(size_t* free_bytes, size_t* total_bytes);
SOFTCUDA_DECL CUresult cuMemcpy(CUdeviceptr dst, CUdeviceptr src, size_t n);
SOFTCUDA_DECL CUresult cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream stream);
SOFTCUDA_DECL CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void* src, size_t n);
SOFTCUDA_DECL CUresult cuMemcpyHtoD(CUdeviceptr dst, const void* src, size_t n);
SOFTCUDA_DECL CUresult cuMemcpyDtoH_v2(void* dst, CUdeviceptr src, size_t n);
SOFTCUDA_DECL CUresult cuMemcpyDtoH(void* dst, CUdeviceptr src, size_t n);
SOFTCUDA_DECL CUresult cuMemcpyDtoD_v2(CUdeviceptr dst, CUdeviceptr src, size_t n);
SOFTCUDA_DECL CUresult cuMemcpyDtoD(CUdeviceptr dst, CUdeviceptr src, size_t n);
SOFTCUDA_DECL CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void* src, size_t n,
                                            CUstream stream);
SOFTCUDA_DECL CUresult cuMemcpyHtoDAsync(CUdeviceptr dst, const void* src, size_t n,
                                         CUstream stream);
SOFTCUDA_DECL CUresult cuMemcpyDtoHAsync_v2(void* dst, CUdeviceptr src, size_t n, CUstream stream);
SOFTCUDA_DECL CUresult cuMemcpyDtoHAsync(void* dst, CUdeviceptr src, size_t n, CUstream stream);
SOFTCUDA_DECL CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr dst, CUdeviceptr src, size_t n,
                                            CUstream stream);
SOFTCUDA_DECL CUresult cuMemcpyDtoDAsync(CUdeviceptr dst, CUdeviceptr src, size_t n,
                                         CUstream stream);
SOFTCUDA_DECL CUresult cuMemsetD8_v2(CUdeviceptr dst, unsigned char value, size_t n);
SOFTCUDA_DECL CUresult cuMemsetD8(CUdeviceptr dst, unsigned char value, size_t n);
SOFTCUDA_DECL CUresult cuMemHostAlloc(void** pp, size_t bytesize, unsigned int flags);
SOFTCUDA_DECL CUresult cuMemAllocHost_v2(void** pp, size_t bytesize);
SOFTCUDA_DECL CUresult cuMemAllocHost(void** pp, size_t bytesize);
SOFTCUDA_DECL CUresult cuMemFreeHost(void* p);
SOFTCUDA_DECL CUresult cuMemHostRegister_v2(void* p, size_t bytesize, unsigned int flags);
SOFTCUDA_DECL CUresult cuMemHostRegister(void* p, size_t bytesize, unsigned int flags);
SOFTCUDA_DECL CUresult cuMemHostUnregister(void* p);
SOFTCUDA_DECL CUresult cuMemHostGetDevicePointer_v2(CUdeviceptr* pdptr, void* p,
                                                    unsigned int flags);
SOFTCUDA_DECL CUresult cuMemHostGetDevicePointer(CUdeviceptr* pdptr, void* p, unsigned int flags);
SOFTCUDA_DECL CUresult cuPointerGetAttribute(void* data, CUpointer_attribute attribute,
                                             CUdeviceptr ptr);
SOFTCUDA_DECL CUresult cuPointerGetAttributes(unsigned int count, CUpointer_attribute* attributes,
                                              void** data, CUdeviceptr ptr);
SOFTCUDA_DECL CUresult cuPointerSetAttribute(const void* value, CUpointer_attribute attribute,
                                             CUdeviceptr ptr);
SOFTCUDA_DECL CUresult cuMemGetHandleForAddressRange(void* handle, CUdeviceptr dptr, size_t size,
                                                     CUmemRangeHandleType type,
                                                     unsigned long long flags);
SOFTCUDA_DECL CUresult cuFlushGPUDirectRDMAWrites(CUflushGPUDirectRDMAWritesTarget target,
                                                  CUflushGPUDirectRDMAWritesScope scope);
SOFTCUDA_DECL CUresult cuIpcGetMemHandle(CUipcMemHandle* handle, CUdeviceptr dptr);
SOFTCUDA_DECL CUresult cuIpcOpenMemHandle_v2(CUdeviceptr* pdptr, CUipcMemHandle handle,
                                             unsigned int flags);
SOFTCUDA_DECL CUresult cuIpcOpenMemHandle(CUdeviceptr* pdptr, CUipcMemHandle handle,
                                          unsigned int flags);
SOFTCUDA_DECL CUresult cuIpcCloseMemHandle(CUdeviceptr dptr);
SOFTCUDA_DECL CUresult cuStreamCreate(CUstream* stream, unsigned int flags);
SOFTCUDA_DECL CUresult cuStreamDestroy_v2(CUstream stream);
SOFTCUDA_DECL CUresult cuStreamDestroy(CUstream stream);
SOFTCUDA_DECL CUresult cuStreamSynchronize(CUstream stream);
SOFTCUDA_DECL CUresult cuStreamQuery(CUstream stream);
SOFTCUDA_DECL CUresult cuEventCreate(CUevent* event, unsigned int flags);
SOFTCUDA_DECL CUresult cuEventDestroy_v2(CUevent event);
SOFTCUDA_DECL CUresult cuEventDestroy(CUevent event);
SOFTCUDA_DECL CUresult cuEventRecord(CUevent event, CUstream stream);
SOFTCUDA_DECL CUresult cuEventSynchronize(CUevent event);
SOFTCUDA_DECL CUresult cuEventQuery(CUevent event);
SOFTCUDA_DECL CUresult cuGetProcAddress_v2(const char* symbol, void** pfn, int cuda_version,
                                           cuuint64_t flags,
                                           CUdriverProcAddressQueryResult* status);
SOFTCUDA_DECL CUresult cuGetProcAddress(const char* symbol, void** pfn, int cuda_version,
                                        cuuint64_t flags);

// libcudart.so
SOFTCUDA_DECL const char* cudaGetErrorName(cudaError_t error);
SOFTCUDA_DECL const char* cudaGetErrorString(cudaError_t error);
SOFTCUDA_DECL cudaError_t cudaGetLastError(void);
SOFTCUDA_DECL cudaError_t cudaPeekAtLastError(void);
SOFTCUDA_DECL cudaError_t cudaRuntimeGetVersion(int* version);
SOFTCUDA_DECL cudaError_t cudaDriverGetVersion(int* version);
SOFTCUDA_DECL cudaError_t cudaGetDeviceCount(int* count);
SOFTCUDA_DECL cudaError_t cudaGetDevice(int* device);
SOFTCUDA_DECL cudaError_t cudaSetDevice(int device);
SOFTCUDA_DECL cudaError_t cudaDeviceSynchronize(void);
SOFTCUDA_DECL cudaError_t cudaDeviceCanAccessPeer(int* can_access, int device, int peer);
SOFTCUDA_DECL cudaError_t cudaDeviceGetPCIBusId(char* bus_id, int len, int device);
SOFTCUDA_DECL cudaError_t cudaMalloc(void** ptr, size_t size);
SOFTCUDA_DECL cudaError_t cudaFree(void* ptr);
SOFTCUDA_DECL cudaError_t cudaMemcpy(void* dst, const void* src, size_t count,
                                     enum cudaMemcpyKind kind);
SOFTCUDA_DECL cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t count,
                                          enum cudaMemcpyKind kind, cudaStream_t stream);
SOFTCUDA_DECL cudaError_t cudaMemset(void* dst, int value, size_t count);
SOFTCUDA_DECL cudaError_t cudaPointerGetAttributes(struct cudaPointerAttributes* attributes,
                                                   const void* ptr);
SOFTCUDA_DECL cudaError_t cudaHostAlloc(void** ptr, size_t size, unsigned int flags);
SOFTCUDA_DECL cudaError_t cudaMallocHost(void** ptr, size_t size);
SOFTCUDA_DECL cudaError_t cudaFreeHost(void* ptr);
SOFTCUDA_DECL cudaError_t cudaHostRegister(void* ptr, size_t size, unsigned int flags);
SOFTCUDA_DECL cudaError_t cudaHostUnregister(void* ptr);
SOFTCUDA_DECL cudaError_t cudaIpcGetMemHandle(cudaIpcMemHandle_t* handle, void* ptr);
SOFTCUDA_DECL cudaError_t cudaIpcOpenMemHandle(void** ptr, cudaIpcMemHandle_t handle,
                                               unsigned int flags);
SOFTCUDA_DECL cudaError_t cudaIpcCloseMemHandle(void* ptr);
SOFTCUDA_DECL cudaError_t cudaStreamCreate(cudaStream_t* stream);
SOFTCUDA_DECL cudaError_t cudaStreamDestroy(cudaStream_t stream);
SOFTCUDA_DECL cudaError_t cudaStreamSynchronize(cudaStream_t stream);

}  // extern "C"
