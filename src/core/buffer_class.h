// What a buffer NCCL asks a transport to register is (host or CUDA memory,
// which GPU, which allocation), and the registration cache key it is
// registered under. Both transports classify and key the same way, with the
// same errors; only how they register differs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "core/mr_cache.h"
#include "nccl/types.h"

namespace weft {

namespace cuda {
class Driver;
}

struct BufferClass {
  int type = NCCL_PTR_HOST;        // NCCL_PTR_HOST or NCCL_PTR_CUDA
  int device = -1;                 // CUDA ordinal
  uint64_t buffer_id = 0;          // CUDA allocation id
  uintptr_t allocation_start = 0;  // CUDA allocation bounds, 0 when unknown
  size_t allocation_size = 0;
};

// Classifies `size` bytes at `data` that NCCL registers as `type` on
// `device_name`. `cuda`: the driver when that device registers GPU memory,
// else nullptr, and `gpu_off_reason` says why. Logs why and returns NCCL's
// error for a type that is neither host nor CUDA, GPU memory on a device
// without it, and a pointer CUDA does not know as device memory. Sets
// SYNC_MEMOPS on GPU buffers, as NCCL's own transports do.
ncclResult_t classify_buffer(const std::string& device_name, const cuda::Driver* cuda,
                             const std::string& gpu_off_reason, void* data, size_t size, int type,
                             BufferClass* out);

// This host's page size (sysconf), 4096 when it cannot be read.
size_t host_page_size();

// The cache key of `size` bytes at `data`: whole host pages around them, of
// the buffer's memory type, device and allocation.
MrKey page_key(const void* data, size_t size, const BufferClass& buffer);

// `key` narrowed to the buffer's CUDA allocation, which need not start or
// end on a host page (where a registration must stay inside one
// allocation); unchanged when the allocation is unknown.
MrKey clipped_to_allocation(MrKey key, const BufferClass& buffer);

}  // namespace weft
