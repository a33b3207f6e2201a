// What a registration on a device's domain is, apart from the endpoint that
// makes it and the handle NCCL holds: the fi_mr with its descriptor and
// key, the cache that shares it, and the memory it was asked for.
#pragma once

#include <rdma/fi_domain.h>

#include <cstddef>
#include <cstdint>

#include "core/buffer_class.h"
#include "core/mr_cache.h"
#include "nccl/types.h"

namespace weft::ofi {

// One fi_mr, possibly shared by several handles through the cache.
struct Registration {
  fid_mr* mr = nullptr;
  void* descriptor = nullptr;
  uint64_t key = 0;     // remote key (fi_mr_key)
  uintptr_t start = 0;  // first byte registered
};
using RegistrationCache = MrCache<Registration>;

// What regMr/regMrDmaBuf were given, after classification.
struct MemorySource : BufferClass {
  int dmabuf_fd = -1;  // >= 0: register from this dma-buf (not kept)
  uint64_t dmabuf_offset = 0;
};

}  // namespace weft::ofi
