// softcuda libcudart.so: a test double of the CUDA runtime API, built on the
// softcuda driver (libcuda.so.1, linked from the same directory) the way the
// real runtime is built on the real driver. It provides what libfabric 2.6
// resolves from libcudart.so (src/hmem_cuda.c: cudaMemcpy,
// cudaDeviceSynchronize, cudaFree, cudaMalloc, cudaGetErrorName,
// cudaGetErrorString, cudaHostRegister, cudaHostUnregister,
// cudaGetDeviceCount, cudaGetDevice, cudaSetDevice, cudaIpcOpenMemHandle,
// cudaIpcGetMemHandle, cudaIpcCloseMemHandle, cudaHostAlloc, cudaFreeHost)
// plus a few neighbours that tests commonly need.
//
// Like the real runtime, each call initialises the driver on first use and
// makes the primary context of the thread's device (cudaSetDevice, default 0)
// current, retaining it for the life of the process.

#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "cuda_abi.h"

#define SOFTCUDA_API extern "C" __attribute__((visibility("default")))

namespace {

struct ErrorInfo {
  int code;
  const char* name;
  const char* text;
};

// All cudaError values of CUDA 13.0, with the runtime's messages for the common
// ones and a readable form of the name for the rest.
constexpr ErrorInfo kRuntimeErrors[] = {
    {0, "cudaSuccess", "no error"},
    {1, "cudaErrorInvalidValue", "invalid argument"},
    {2, "cudaErrorMemoryAllocation", "out of memory"},
    {3, "cudaErrorInitializationError", "initialization error"},
    {4, "cudaErrorCudartUnloading", "cudart unloading"},
    {5, "cudaErrorProfilerDisabled", "profiler disabled"},
    {6, "cudaErrorProfilerNotInitialized", "profiler not initialized"},
    {7, "cudaErrorProfilerAlreadyStarted", "profiler already started"},
    {8, "cudaErrorProfilerAlreadyStopped", "profiler already stopped"},
    {9, "cudaErrorInvalidConfiguration", "invalid configuration"},
    {12, "cudaErrorInvalidPitchValue", "invalid pitch value"},
    {13, "cudaErrorInvalidSymbol", "invalid symbol"},
    {16, "cudaErrorInvalidHostPointer", "invalid host pointer"},
    {17, "cudaErrorInvalidDevicePointer", "invalid device pointer"},
    {18, "cudaErrorInvalidTexture", "invalid texture"},
    {19, "cudaErrorInvalidTextureBinding", "invalid texture binding"},
    {20, "cudaErrorInvalidChannelDescriptor", "invalid channel descriptor"},
    {21, "cudaErrorInvalidMemcpyDirection", "invalid copy direction for memcpy"},
    {22, "cudaErrorAddressOfConstant", "address of constant"},
    {23, "cudaErrorTextureFetchFailed", "texture fetch failed"},
    {24, "cudaErrorTextureNotBound", "texture not bound"},
    {25, "cudaErrorSynchronizationError", "synchronization error"},
    {26, "cudaErrorInvalidFilterSetting", "invalid filter setting"},
    {27, "cudaErrorInvalidNormSetting", "invalid norm setting"},
    {28, "cudaErrorMixedDeviceExecution", "mixed device execution"},
    {31, "cudaErrorNotYetImplemented", "not yet implemented"},
    {32, "cudaErrorMemoryValueTooLarge", "memory value too large"},
    {34, "cudaErrorStubLibrary", "stub library"},
    {35, "cudaErrorInsufficientDriver",
     "CUDA driver version is insufficient for CUDA runtime version"},
    {36, "cudaErrorCallRequiresNewerDriver", "call requires newer driver"},
    {37, "cudaErrorInvalidSurface", "invalid surface"},
    {43, "cudaErrorDuplicateVariableName", "duplicate variable name"},
    {44, "cudaErrorDuplicateTextureName", "duplicate texture name"},
    {45, "cudaErrorDuplicateSurfaceName", "duplicate surface name"},
    {46, "cudaErrorDevicesUnavailable", "devices unavailable"},
    {49, "cudaErrorIncompatibleDriverContext", "incompatible driver context"},
    {52, "cudaErrorMissingConfiguration", "missing configuration"},
    {53, "cudaErrorPriorLaunchFailure", "prior launch failure"},
    {65, "cudaErrorLaunchMaxDepthExceeded", "launch max depth exceeded"},
    {66, "cudaErrorLaunchFileScopedTex", "launch file scoped tex"},
    {67, "cudaErrorLaunchFileScopedSurf", "launch file scoped surf"},
    {68, "cudaErrorSyncDepthExceeded", "sync depth exceeded"},
    {69, "cudaErrorLaunchPendingCountExceeded", "launch pending count exceeded"},
    {98, "cudaErrorInvalidDeviceFunction", "invalid device function"},
    {100, "cudaErrorNoDevice", "no CUDA-capable device is detected"},
    {101, "cudaErrorInvalidDevice", "invalid device ordinal"},
    {102, "cudaErrorDeviceNotLicensed", "device not licensed"},
    {103, "cudaErrorSoftwareValidityNotEstablished", "software validity not established"},
    {127, "cudaErrorStartupFailure", "startup failure"},
    {200, "cudaErrorInvalidKernelImage", "invalid kernel image"},
    {201, "cudaErrorDeviceUninitialized", "invalid device context"},
    {205, "cudaErrorMapBufferObjectFailed", "mapping of buffer object failed"},
    {206, "cudaErrorUnmapBufferObjectFailed", "unmap buffer object failed"},
    {207, "cudaErrorArrayIsMapped", "array is mapped"},
    {208, "cudaErrorAlreadyMapped", "resource already mapped"},
    {209, "cudaErrorNoKernelImageForDevice", "no kernel image for device"},
    {210, "cudaErrorAlreadyAcquired", "already acquired"},
    {211, "cudaErrorNotMapped", "not mapped"},
    {212, "cudaErrorNotMappedAsArray", "not mapped as array"},
    {213, "cudaErrorNotMappedAsPointer", "not mapped as pointer"},
    {214, "cudaErrorECCUncorrectable", "e c c uncorrectable"},
    {215, "cudaErrorUnsupportedLimit", "unsupported limit"},
    {216, "cudaErrorDeviceAlreadyInUse", "device already in use"},
    {217, "cudaErrorPeerAccessUnsupported", "peer access unsupported"},
    {218, "cudaErrorInvalidPtx", "invalid ptx"},
    {219, "cudaErrorInvalidGraphicsContext", "invalid graphics context"},
    {220, "cudaErrorNvlinkUncorrectable", "nvlink uncorrectable"},
    {221, "cudaErrorJitCompilerNotFound", "jit compiler not found"},
    {222, "cudaErrorUnsupportedPtxVersion", "unsupported ptx version"},
    {223, "cudaErrorJitCompilationDisabled", "jit compilation disabled"},
    {224, "cudaErrorUnsupportedExecAffinity", "unsupported exec affinity"},
    {225, "cudaErrorUnsupportedDevSideSync", "unsupported dev side sync"},
    {226, "cudaErrorContained", "contained"},
    {300, "cudaErrorInvalidSource", "invalid source"},
    {301, "cudaErrorFileNotFound", "file not found"},
    {302, "cudaErrorSharedObjectSymbolNotFound", "shared object symbol not found"},
    {303, "cudaErrorSharedObjectInitFailed", "shared object init failed"},
    {304, "cudaErrorOperatingSystem", "OS call failed or operation not supported on this OS"},
    {400, "cudaErrorInvalidResourceHandle", "invalid resource handle"},
    {401, "cudaErrorIllegalState", "illegal state"},
    {402, "cudaErrorLossyQuery", "lossy query"},
    {500, "cudaErrorSymbolNotFound", "named symbol not found"},
    {600, "cudaErrorNotReady", "device not ready"},
    {700, "cudaErrorIllegalAddress", "illegal address"},
    {701, "cudaErrorLaunchOutOfResources", "launch out of resources"},
    {702, "cudaErrorLaunchTimeout", "launch timeout"},
    {703, "cudaErrorLaunchIncompatibleTexturing", "launch incompatible texturing"},
    {704, "cudaErrorPeerAccessAlreadyEnabled", "peer access already enabled"},
    {705, "cudaErrorPeerAccessNotEnabled", "peer access not enabled"},
    {708, "cudaErrorSetOnActiveProcess", "set on active process"},
    {709, "cudaErrorContextIsDestroyed", "context is destroyed"},
    {710, "cudaErrorAssert", "assert"},
    {711, "cudaErrorTooManyPeers", "too many peers"},
    {712, "cudaErrorHostMemoryAlreadyRegistered",
     "part or all of the requested memory range is already mapped"},
    {713, "cudaErrorHostMemoryNotRegistered",
     "pointer does not correspond to a registered memory region"},
    {714, "cudaErrorHardwareStackError", "hardware stack error"},
    {715, "cudaErrorIllegalInstruction", "illegal instruction"},
    {716, "cudaErrorMisalignedAddress", "misaligned address"},
    {717, "cudaErrorInvalidAddressSpace", "invalid address space"},
    {718, "cudaErrorInvalidPc", "invalid pc"},
    {719, "cudaErrorLaunchFailure", "launch failure"},
    {720, "cudaErrorCooperativeLaunchTooLarge", "cooperative launch too large"},
    {721, "cudaErrorTensorMemoryLeak", "tensor memory leak"},
    {800, "cudaErrorNotPermitted", "operation not permitted"},
    {801, "cudaErrorNotSupported", "operation not supported"},
    {802, "cudaErrorSystemNotReady", "system not ready"},
    {803, "cudaErrorSystemDriverMismatch", "system driver mismatch"},
    {804, "cudaErrorCompatNotSupportedOnDevice", "compat not supported on device"},
    {805, "cudaErrorMpsConnectionFailed", "mps connection failed"},
    {806, "cudaErrorMpsRpcFailure", "mps rpc failure"},
    {807, "cudaErrorMpsServerNotReady", "mps server not ready"},
    {808, "cudaErrorMpsMaxClientsReached", "mps max clients reached"},
    {809, "cudaErrorMpsMaxConnectionsReached", "mps max connections reached"},
    {810, "cudaErrorMpsClientTerminated", "mps client terminated"},
    {811, "cudaErrorCdpNotSupported", "cdp not supported"},
    {812, "cudaErrorCdpVersionMismatch", "cdp version mismatch"},
    {900, "cudaErrorStreamCaptureUnsupported", "stream capture unsupported"},
    {901, "cudaErrorStreamCaptureInvalidated", "stream capture invalidated"},
    {902, "cudaErrorStreamCaptureMerge", "stream capture merge"},
    {903, "cudaErrorStreamCaptureUnmatched", "stream capture unmatched"},
    {904, "cudaErrorStreamCaptureUnjoined", "stream capture unjoined"},
    {905, "cudaErrorStreamCaptureIsolation", "stream capture isolation"},
    {906, "cudaErrorStreamCaptureImplicit", "stream capture implicit"},
    {907, "cudaErrorCapturedEvent", "captured event"},
    {908, "cudaErrorStreamCaptureWrongThread", "stream capture wrong thread"},
    {909, "cudaErrorTimeout", "timeout"},
    {910, "cudaErrorGraphExecUpdateFailure", "graph exec update failure"},
    {911, "cudaErrorExternalDevice", "external device"},
    {912, "cudaErrorInvalidClusterSize", "invalid cluster size"},
    {913, "cudaErrorFunctionNotLoaded", "function not loaded"},
    {914, "cudaErrorInvalidResourceType", "invalid resource type"},
    {915, "cudaErrorInvalidResourceConfiguration", "invalid resource configuration"},
    {999, "cudaErrorUnknown", "unknown error"},
};

const ErrorInfo* find_error(int code) {
  for (const ErrorInfo& e : kRuntimeErrors) {
    if (e.code == code) return &e;
  }
  return nullptr;
}

bool logging() {
  const char* v = std::getenv("SOFTCUDA_LOG");
  return v != nullptr && *v != '\0' && std::strcmp(v, "0") != 0;
}

class Trace {
 public:
  explicit Trace(const char* name) : on_(logging()), name_(name) { args_[0] = '\0'; }
  Trace(const char* name, const char* fmt, ...) __attribute__((format(printf, 3, 4)))
  : on_(logging()), name_(name) {
    args_[0] = '\0';
    if (!on_) return;
    va_list ap;
    va_start(ap, fmt);
    std::vsnprintf(args_, sizeof(args_), fmt, ap);
    va_end(ap);
  }
  cudaError_t operator()(cudaError_t r) const;

 private:
  bool on_;
  const char* name_;
  char args_[256];
};

thread_local cudaError_t t_last_error = cudaSuccess;
thread_local int t_device = 0;

cudaError_t Trace::operator()(cudaError_t r) const {
  if (r != cudaSuccess) t_last_error = r;
  if (on_) {
    const ErrorInfo* e = find_error(r);
    std::fprintf(stderr, "softcuda: %s(%s) = %s\n", name_, args_,
                 e != nullptr ? e->name : "cudaError<unrecognized>");
  }
  return r;
}

// The driver's CUresult values the runtime passes on have the same numbers as
// their cudaError counterparts (CUDA_ERROR_INVALID_CONTEXT = 201 =
// cudaErrorDeviceUninitialized, CUDA_ERROR_INVALID_HANDLE = 400 =
// cudaErrorInvalidResourceHandle, ...), except that a failed initialisation
// is cudaErrorInitializationError for any reason but "no device".
cudaError_t from_cu(CUresult r) {
  return static_cast<cudaError_t>(r);
}

std::mutex g_primary_mu;
CUcontext g_primary[64] = {};  // retained once, for the life of the process

// Makes the primary context of dev current on this thread.
cudaError_t use_primary_context(int dev) {
  CUcontext ctx = nullptr;
  {
    std::lock_guard<std::mutex> lock(g_primary_mu);
    if (g_primary[dev] == nullptr) {
      CUresult r = cuDevicePrimaryCtxRetain(&g_primary[dev], dev);
      if (r != CUDA_SUCCESS)
        return r == CUDA_ERROR_INVALID_DEVICE ? cudaErrorInvalidDevice : from_cu(r);
    }
    ctx = g_primary[dev];
  }
  t_device = dev;
  return from_cu(cuCtxSetCurrent(ctx));
}

cudaError_t init_driver() {
  CUresult r = cuInit(0);
  if (r == CUDA_ERROR_NO_DEVICE) return cudaErrorNoDevice;
  return r == CUDA_SUCCESS ? cudaSuccess : cudaErrorInitializationError;
}

// cuInit, then a current context: the one the driver API made current on this
// thread if any (the runtime adopts it, as the real one does), otherwise the
// primary context of the thread's device.
cudaError_t ensure_context() {
  cudaError_t e = init_driver();
  if (e != cudaSuccess) return e;
  CUcontext ctx = nullptr;
  CUdevice dev = 0;
  if (cuCtxGetCurrent(&ctx) == CUDA_SUCCESS && ctx != nullptr &&
      cuCtxGetDevice(&dev) == CUDA_SUCCESS) {
    t_device = dev;
    return cudaSuccess;
  }
  int count = 0;
  cuDeviceGetCount(&count);
  if (t_device >= count) return cudaErrorInvalidDevice;
  return use_primary_context(t_device);
}

// Device memory as the runtime sees it: device allocations and IPC mappings.
bool is_device_pointer(const void* p) {
  unsigned type = 0;
  return cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                               reinterpret_cast<CUdeviceptr>(p)) == CUDA_SUCCESS &&
         type == CU_MEMORYTYPE_DEVICE;
}

}  // namespace

#define ENSURE_CONTEXT(t)                            \
  do {                                               \
    cudaError_t ctx_err_ = ensure_context();         \
    if (ctx_err_ != cudaSuccess) return t(ctx_err_); \
  } while (0)

// ================================================================== errors ===
SOFTCUDA_API const char* cudaGetErrorName(cudaError_t error) {
  const ErrorInfo* e = find_error(error);
  return e != nullptr ? e->name : "unrecognized error code";
}

SOFTCUDA_API const char* cudaGetErrorString(cudaError_t error) {
  const ErrorInfo* e = find_error(error);
  return e != nullptr ? e->text : "unrecognized error code";
}

SOFTCUDA_API cudaError_t cudaGetLastError(void) {
  cudaError_t e = t_last_error;
  t_last_error = cudaSuccess;
  return e;
}

SOFTCUDA_API cudaError_t cudaPeekAtLastError(void) {
  return t_last_error;
}

// ================================================================= version ===
SOFTCUDA_API cudaError_t cudaRuntimeGetVersion(int* version) {
  Trace t("cudaRuntimeGetVersion");
  if (version == nullptr) return t(cudaErrorInvalidValue);
  *version = 13000;
  return t(cudaSuccess);
}

SOFTCUDA_API cudaError_t cudaDriverGetVersion(int* version) {
  Trace t("cudaDriverGetVersion");
  if (version == nullptr) return t(cudaErrorInvalidValue);
  return t(from_cu(cuDriverGetVersion(version)));
}

// ================================================================= devices ===
SOFTCUDA_API cudaError_t cudaGetDeviceCount(int* count) {
  Trace t("cudaGetDeviceCount");
  if (count == nullptr) return t(cudaErrorInvalidValue);
  *count = 0;
  cudaError_t e = init_driver();
  if (e != cudaSuccess) return t(e);
  return t(from_cu(cuDeviceGetCount(count)));
}

SOFTCUDA_API cudaError_t cudaGetDevice(int* device) {
  Trace t("cudaGetDevice");
  if (device == nullptr) return t(cudaErrorInvalidValue);
  ENSURE_CONTEXT(t);
  *device = t_device;
  return t(cudaSuccess);
}

SOFTCUDA_API cudaError_t cudaSetDevice(int device) {
  Trace t("cudaSetDevice", "device=%d", device);
  cudaError_t e = init_driver();
  if (e != cudaSuccess) return t(e);
  int count = 0;
  cuDeviceGetCount(&count);
  if (device < 0 || device >= count || device >= 64) return t(cudaErrorInvalidDevice);
  return t(use_primary_context(device));
}

SOFTCUDA_API cudaError_t cudaDeviceSynchronize(void) {
  Trace t("cudaDeviceSynchronize");
  ENSURE_CONTEXT(t);
  return t(from_cu(cuCtxSynchronize()));
}

SOFTCUDA_API cudaError_t cudaDeviceCanAccessPeer(int* can_access, int device, int peer) {
  Trace t("cudaDeviceCanAccessPeer", "device=%d, peer=%d", device, peer);
  ENSURE_CONTEXT(t);
  CUresult r = cuDeviceCanAccessPeer(can_access, device, peer);
  return t(r == CUDA_ERROR_INVALID_DEVICE ? cudaErrorInvalidDevice : from_cu(r));
}

SOFTCUDA_API cudaError_t cudaDeviceGetPCIBusId(char* bus_id, int len, int device) {
  Trace t("cudaDeviceGetPCIBusId", "len=%d, device=%d", len, device);
  ENSURE_CONTEXT(t);
  return t(from_cu(cuDeviceGetPCIBusId(bus_id, len, device)));
}

// ================================================================== memory ===
SOFTCUDA_API cudaError_t cudaMalloc(void** ptr, size_t size) {
  Trace t("cudaMalloc", "size=%zu", size);
  if (ptr == nullptr) return t(cudaErrorInvalidValue);
  ENSURE_CONTEXT(t);
  if (size == 0) {  // the runtime hands out NULL for an empty allocation
    *ptr = nullptr;
    return t(cudaSuccess);
  }
  CUdeviceptr d = 0;
  CUresult r = cuMemAlloc_v2(&d, size);
  if (r == CUDA_ERROR_OUT_OF_MEMORY) return t(cudaErrorMemoryAllocation);
  if (r != CUDA_SUCCESS) return t(from_cu(r));
  *ptr = reinterpret_cast<void*>(d);
  return t(cudaSuccess);
}

SOFTCUDA_API cudaError_t cudaFree(void* ptr) {
  Trace t("cudaFree", "ptr=%p", ptr);
  ENSURE_CONTEXT(t);
  if (ptr == nullptr) return t(cudaSuccess);
  CUresult r = cuMemFree_v2(reinterpret_cast<CUdeviceptr>(ptr));
  return t(r == CUDA_SUCCESS ? cudaSuccess : cudaErrorInvalidValue);
}

SOFTCUDA_API cudaError_t cudaMemcpy(void* dst, const void* src, size_t count,
                                    enum cudaMemcpyKind kind) {
  Trace t("cudaMemcpy", "dst=%p, src=%p, count=%zu, kind=%d", dst, src, count,
          static_cast<int>(kind));
  if (kind < cudaMemcpyHostToHost || kind > cudaMemcpyDefault) {
    return t(cudaErrorInvalidMemcpyDirection);
  }
  ENSURE_CONTEXT(t);
  if (count == 0) return t(cudaSuccess);
  // An explicit direction must match the pointers (device memory is what the
  // driver reports as CU_MEMORYTYPE_DEVICE); cudaMemcpyDefault infers it.
  const bool dst_dev = is_device_pointer(dst);
  const bool src_dev = is_device_pointer(src);
  bool ok = true;
  switch (kind) {
    case cudaMemcpyHostToHost:
      ok = !dst_dev && !src_dev;
      break;
    case cudaMemcpyHostToDevice:
      ok = dst_dev && !src_dev;
      break;
    case cudaMemcpyDeviceToHost:
      ok = !dst_dev && src_dev;
      break;
    case cudaMemcpyDeviceToDevice:
      ok = dst_dev && src_dev;
      break;
    case cudaMemcpyDefault:
      break;
  }
  if (!ok) return t(cudaErrorInvalidValue);
  CUresult r =
      cuMemcpy(reinterpret_cast<CUdeviceptr>(dst), reinterpret_cast<CUdeviceptr>(src), count);
  return t(r == CUDA_SUCCESS ? cudaSuccess : cudaErrorInvalidValue);
}

SOFTCUDA_API cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t count,
                                         enum cudaMemcpyKind kind, cudaStream_t stream) {
  Trace t("cudaMemcpyAsync", "stream=%p", static_cast<void*>(stream));
  ENSURE_CONTEXT(t);
  if (cuStreamQuery(stream) != CUDA_SUCCESS) return t(cudaErrorInvalidResourceHandle);
  return t(cudaMemcpy(dst, src, count, kind));
}

SOFTCUDA_API cudaError_t cudaMemset(void* dst, int value, size_t count) {
  Trace t("cudaMemset", "dst=%p, value=%d, count=%zu", dst, value, count);
  ENSURE_CONTEXT(t);
  CUresult r =
      cuMemsetD8_v2(reinterpret_cast<CUdeviceptr>(dst), static_cast<unsigned char>(value), count);
  return t(r == CUDA_SUCCESS ? cudaSuccess : cudaErrorInvalidValue);
}

SOFTCUDA_API cudaError_t cudaPointerGetAttributes(struct cudaPointerAttributes* attributes,
                                                  const void* ptr) {
  Trace t("cudaPointerGetAttributes", "ptr=%p", ptr);
  if (attributes == nullptr) return t(cudaErrorInvalidValue);
  ENSURE_CONTEXT(t);
  unsigned type = 0;
  int ordinal = -2;
  void* host = nullptr;
  CUpointer_attribute attrs[] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                                 CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
                                 CU_POINTER_ATTRIBUTE_HOST_POINTER};
  void* data[] = {&type, &ordinal, &host};
  CUresult r = cuPointerGetAttributes(3, attrs, data, reinterpret_cast<CUdeviceptr>(ptr));
  if (r != CUDA_SUCCESS) return t(from_cu(r));
  std::memset(attributes, 0, sizeof(*attributes));
  switch (type) {
    case CU_MEMORYTYPE_DEVICE:
      attributes->type = cudaMemoryTypeDevice;
      attributes->device = ordinal;
      attributes->devicePointer = const_cast<void*>(ptr);
      break;
    case CU_MEMORYTYPE_HOST:
      attributes->type = cudaMemoryTypeHost;
      attributes->device = ordinal;
      attributes->devicePointer = const_cast<void*>(ptr);
      attributes->hostPointer = host;
      break;
    default:  // unregistered host memory: success since CUDA 11
      attributes->type = cudaMemoryTypeUnregistered;
      attributes->device = -2;
      attributes->hostPointer = const_cast<void*>(ptr);
      break;
  }
  return t(cudaSuccess);
}

// ------------------------------------------------------------- host memory --
SOFTCUDA_API cudaError_t cudaHostAlloc(void** ptr, size_t size, unsigned int flags) {
  Trace t("cudaHostAlloc", "size=%zu, flags=0x%x", size, flags);
  if (ptr == nullptr) return t(cudaErrorInvalidValue);
  ENSURE_CONTEXT(t);
  CUresult r = cuMemHostAlloc(ptr, size, flags);
  if (r == CUDA_ERROR_OUT_OF_MEMORY) return t(cudaErrorMemoryAllocation);
  return t(from_cu(r));
}

SOFTCUDA_API cudaError_t cudaMallocHost(void** ptr, size_t size) {
  return cudaHostAlloc(ptr, size, cudaHostAllocDefault);
}

SOFTCUDA_API cudaError_t cudaFreeHost(void* ptr) {
  Trace t("cudaFreeHost", "ptr=%p", ptr);
  ENSURE_CONTEXT(t);
  if (ptr == nullptr) return t(cudaSuccess);
  return t(from_cu(cuMemFreeHost(ptr)));
}

SOFTCUDA_API cudaError_t cudaHostRegister(void* ptr, size_t size, unsigned int flags) {
  Trace t("cudaHostRegister", "ptr=%p, size=%zu, flags=0x%x", ptr, size, flags);
  ENSURE_CONTEXT(t);
  return t(from_cu(cuMemHostRegister_v2(ptr, size, flags)));
}

SOFTCUDA_API cudaError_t cudaHostUnregister(void* ptr) {
  Trace t("cudaHostUnregister", "ptr=%p", ptr);
  ENSURE_CONTEXT(t);
  return t(from_cu(cuMemHostUnregister(ptr)));
}

// --------------------------------------------------------------------- IPC --
SOFTCUDA_API cudaError_t cudaIpcGetMemHandle(cudaIpcMemHandle_t* handle, void* ptr) {
  Trace t("cudaIpcGetMemHandle", "ptr=%p", ptr);
  if (handle == nullptr) return t(cudaErrorInvalidValue);
  ENSURE_CONTEXT(t);
  CUipcMemHandle h{};
  CUresult r = cuIpcGetMemHandle(&h, reinterpret_cast<CUdeviceptr>(ptr));
  if (r != CUDA_SUCCESS) return t(from_cu(r));
  static_assert(sizeof(h) == sizeof(*handle), "IPC handles of the driver and runtime match");
  std::memcpy(handle, &h, sizeof(h));
  return t(cudaSuccess);
}

SOFTCUDA_API cudaError_t cudaIpcOpenMemHandle(void** ptr, cudaIpcMemHandle_t handle,
                                              unsigned int flags) {
  Trace t("cudaIpcOpenMemHandle", "flags=%u", flags);
  if (ptr == nullptr) return t(cudaErrorInvalidValue);
  ENSURE_CONTEXT(t);
  CUipcMemHandle h{};
  std::memcpy(&h, &handle, sizeof(h));
  CUdeviceptr d = 0;
  CUresult r = cuIpcOpenMemHandle_v2(&d, h, flags);
  if (r != CUDA_SUCCESS) return t(from_cu(r));
  *ptr = reinterpret_cast<void*>(d);
  return t(cudaSuccess);
}

SOFTCUDA_API cudaError_t cudaIpcCloseMemHandle(void* ptr) {
  Trace t("cudaIpcCloseMemHandle", "ptr=%p", ptr);
  ENSURE_CONTEXT(t);
  return t(from_cu(cuIpcCloseMemHandle(reinterpret_cast<CUdeviceptr>(ptr))));
}

// ----------------------------------------------------------------- streams --
SOFTCUDA_API cudaError_t cudaStreamCreate(cudaStream_t* stream) {
  Trace t("cudaStreamCreate");
  if (stream == nullptr) return t(cudaErrorInvalidValue);
  ENSURE_CONTEXT(t);
  return t(from_cu(cuStreamCreate(stream, 0)));
}

SOFTCUDA_API cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  Trace t("cudaStreamDestroy", "stream=%p", static_cast<void*>(stream));
  ENSURE_CONTEXT(t);
  CUresult r = cuStreamDestroy_v2(stream);
  return t(r == CUDA_ERROR_INVALID_HANDLE ? cudaErrorInvalidResourceHandle : from_cu(r));
}

SOFTCUDA_API cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  Trace t("cudaStreamSynchronize", "stream=%p", static_cast<void*>(stream));
  ENSURE_CONTEXT(t);
  CUresult r = cuStreamSynchronize(stream);
  return t(r == CUDA_ERROR_INVALID_HANDLE ? cudaErrorInvalidResourceHandle : from_cu(r));
}
