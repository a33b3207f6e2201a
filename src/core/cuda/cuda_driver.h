// The CUDA driver, loaded at run time. weft never links libcuda or cudart:
// Driver opens libcuda.so.1 (or a path, such as the softcuda double) with
// dlopen, resolves what it needs through cuGetProcAddress, and answers the
// few questions the transports ask: what a pointer is, whether a GPU can do
// GPUDirect RDMA and dma-buf, a dma-buf fd for a range, and a flush of RDMA
// writes. Without a usable driver weft runs on host memory only.
//
// Every method is thread-safe and noexcept in practice (errors come back as
// false plus a message naming the CUDA call and error), since it is called
// from behind NCCL's C ABI.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "core/cuda/cuda_api.h"

namespace weft::cuda {

struct PointerInfo {
  bool device = false;     // CUDA device memory (false: host memory, pinned or unknown to CUDA)
  bool managed = false;    // managed (unified) memory; device is true as well
  int ordinal = -1;        // device ordinal
  uintptr_t base = 0;      // allocation start (CU_POINTER_ATTRIBUTE_RANGE_START_ADDR)
  size_t size = 0;         // allocation size (CU_POINTER_ATTRIBUTE_RANGE_SIZE)
  uint64_t buffer_id = 0;  // CU_POINTER_ATTRIBUTE_BUFFER_ID (distinguishes reused addresses)
};

class Driver {
 public:
  // The CUDA version whose ABI weft asks cuGetProcAddress for (lowered to the
  // driver's own version when that is older).
  static constexpr int kCudaVersion = 12000;

  // Opens `library` (soname or path), resolves the entry points, calls
  // cuInit(0) and counts devices. nullptr, with *reason set, when unusable.
  // Not cached: each call makes a new instance (tests use this directly).
  static std::unique_ptr<Driver> open(const std::string& library, std::string* reason);

  // The process-wide instance for `library`, opened on first use; nullptr
  // when unusable (the reason is logged once at INFO). Never destroyed: CUDA
  // and NCCL keep libcuda loaded, and unloading it is unsafe.
  static const Driver* shared(const std::string& library);

  // Releases the primary contexts this instance retained; libcuda stays loaded.
  ~Driver();
  Driver(const Driver&) = delete;
  Driver& operator=(const Driver&) = delete;

  const std::string& library() const { return library_; }
  int driver_version() const { return driver_version_; }  // cuDriverGetVersion, 0 if unknown
  int device_count() const { return static_cast<int>(devices_.size()); }

  // "0000:3b:00.0" (domain:bus:device.function, as in /sys/bus/pci/devices),
  // or empty when the driver does not say.
  std::string pci_bus_id(int ordinal) const;
  bool gdr_supported(int ordinal) const;     // CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_SUPPORTED
  bool dmabuf_supported(int ordinal) const;  // CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED, and export
                                             // (cuMemGetHandleForAddressRange) resolved

  // Host memory (unknown to CUDA, or registered/pinned host memory): true
  // with info->device == false. Any other failure: false and *error names
  // the call and the CUDA error.
  bool classify(const void* ptr, PointerInfo* info, std::string* error) const;

  // Sets CU_POINTER_ATTRIBUTE_SYNC_MEMOPS on a device buffer, as NCCL's own
  // transports do for registered GPU buffers, so that synchronous CUDA
  // copies synchronise with RDMA into that buffer.
  bool set_sync_memops(const void* ptr, std::string* error) const;

  // A new dma-buf fd for [base, base+size), which must be page aligned and
  // inside one device allocation. The caller owns and closes *fd.
  bool export_dmabuf(const void* base, size_t size, int* fd, std::string* error) const;

  bool has_flush() const { return api_.flush_rdma_writes != nullptr; }
  // cuFlushGPUDirectRDMAWrites(TARGET_CURRENT_CTX, TO_ALL_DEVICES): RDMA
  // writes that completed before become visible to the GPU. Uses the
  // thread's current context, or GPU 0's primary context when it has none.
  bool flush_rdma_writes(std::string* error) const;

  // Device buffers for tests and tools (weft-perf --mem cuda, GPU probes):
  // cuMemAlloc on GPU `ordinal`, cuMemFree, cuMemcpyHtoD, cuMemcpyDtoH.
  bool alloc(size_t size, int ordinal, void** out, std::string* error) const;
  bool free(void* ptr, std::string* error) const;
  bool copy_to_device(void* dst, const void* src, size_t size, std::string* error) const;
  bool copy_to_host(void* dst, const void* src, size_t size, std::string* error) const;

 private:
  struct Api {
    // Required.
    PFN_cuGetErrorName get_error_name = nullptr;
    PFN_cuInit init = nullptr;
    PFN_cuDeviceGetCount device_get_count = nullptr;
    PFN_cuDeviceGet device_get = nullptr;
    PFN_cuDeviceGetAttribute device_get_attribute = nullptr;
    PFN_cuPointerGetAttribute pointer_get_attribute = nullptr;
    // Optional: the feature is off without them.
    PFN_cuDriverGetVersion driver_get_version = nullptr;
    PFN_cuPointerGetAttributes pointer_get_attributes = nullptr;
    PFN_cuPointerSetAttribute pointer_set_attribute = nullptr;
    PFN_cuMemGetHandleForAddressRange mem_get_handle_for_address_range = nullptr;
    PFN_cuFlushGPUDirectRDMAWrites flush_rdma_writes = nullptr;
    PFN_cuCtxGetCurrent ctx_get_current = nullptr;
    PFN_cuCtxSetCurrent ctx_set_current = nullptr;
    PFN_cuCtxGetDevice ctx_get_device = nullptr;
    PFN_cuDevicePrimaryCtxRetain primary_ctx_retain = nullptr;
    PFN_cuDevicePrimaryCtxRelease primary_ctx_release = nullptr;
    PFN_cuMemAlloc mem_alloc = nullptr;
    PFN_cuMemFree mem_free = nullptr;
    PFN_cuMemcpyHtoD memcpy_htod = nullptr;
    PFN_cuMemcpyDtoH memcpy_dtoh = nullptr;
  };
  class ContextScope;

  Driver() = default;

  // "<call> failed: CUDA_ERROR_...<hint>" into *error; returns false.
  bool fail_call(std::string* error, std::string_view call, CUresult rc,
                 std::string_view hint = {}) const;
  bool fail_missing(std::string* error, std::string_view call) const;
  bool device_attribute(int ordinal, CUdevice_attribute attribute, int* value) const;
  int pointer_ordinal(const void* ptr) const;  // -1 when CUDA does not know it
  bool primary_context(int ordinal, CUcontext* context, std::string* error) const;

  std::string library_;
  void* handle_ = nullptr;  // dlopen handle, deliberately never closed
  int driver_version_ = 0;
  Api api_;
  std::vector<CUdevice> devices_;  // by ordinal
  size_t page_size_ = 4096;

  // Primary contexts retained on demand for threads without a context.
  mutable std::mutex context_mutex_;
  mutable std::vector<CUcontext> primary_;  // by ordinal; nullptr until retained
};

}  // namespace weft::cuda
