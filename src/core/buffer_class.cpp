#include "core/buffer_class.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>

#include "core/cuda/cuda_driver.h"
#include "weft/log.h"

namespace weft {

ncclResult_t classify_buffer(const std::string& device_name, const cuda::Driver* cuda,
                             const std::string& gpu_off_reason, void* data, size_t size, int type,
                             BufferClass* out) {
  *out = BufferClass{};
  out->type = type;
  if (type == NCCL_PTR_HOST) return ncclSuccess;
  if (type != NCCL_PTR_CUDA) {
    WEFT_WARN("%s: cannot register %zu bytes at %p: unsupported memory type %d",
              device_name.c_str(), size, data, type);
    return ncclInvalidArgument;
  }
  if (cuda == nullptr) {
    WEFT_WARN("%s: cannot register %zu bytes of GPU memory at %p: %s", device_name.c_str(), size,
              data, gpu_off_reason.c_str());
    return ncclInvalidUsage;
  }
  cuda::PointerInfo info;
  std::string error;
  if (!cuda->classify(data, &info, &error)) {
    WEFT_WARN("%s: cannot register %zu bytes of GPU memory at %p: %s", device_name.c_str(), size,
              data, error.c_str());
    return ncclUnhandledCudaError;
  }
  if (!info.device) {
    WEFT_WARN(
        "%s: NCCL asked to register %zu bytes at %p as GPU memory, but CUDA does not know that "
        "address as device memory",
        device_name.c_str(), size, data);
    return ncclInvalidArgument;
  }
  out->device = info.ordinal;
  out->buffer_id = info.buffer_id;
  out->allocation_start = info.base;
  out->allocation_size = info.size;
  // As NCCL's own transports do: CUDA copies then synchronise with RDMA.
  // Memory from cuMemCreate (NCCL's own buffers) refuses it on every
  // registration, as it does for NCCL: said once per process, not per
  // registration.
  if (!cuda->set_sync_memops(data, &error)) {
    static std::atomic<bool> said{false};
    if (!said.exchange(true, std::memory_order_relaxed)) {
      WEFT_INFO(NCCL_NET,
                "%s: could not set SYNC_MEMOPS on GPU buffer %p: %s (expected for memory "
                "mapped with cuMemCreate; said once per process)",
                device_name.c_str(), data, error.c_str());
    }
  }
  return ncclSuccess;
}

size_t host_page_size() {
  static const size_t page = [] {
    long bytes = sysconf(_SC_PAGESIZE);
    return bytes > 0 ? static_cast<size_t>(bytes) : size_t{4096};
  }();
  return page;
}

MrKey page_key(const void* data, size_t size, const BufferClass& buffer) {
  MrKey key = page_aligned_key(data, size, host_page_size());
  key.memory_type = buffer.type;
  key.device = buffer.device;
  key.buffer_id = buffer.buffer_id;
  return key;
}

MrKey clipped_to_allocation(MrKey key, const BufferClass& buffer) {
  if (buffer.allocation_size == 0) return key;
  key.start = std::max<uintptr_t>(key.start, buffer.allocation_start);
  key.end = std::min<uintptr_t>(key.end, buffer.allocation_start + buffer.allocation_size);
  return key;
}

}  // namespace weft
