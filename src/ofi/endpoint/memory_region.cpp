#include "ofi/endpoint/memory_region.h"

#include <rdma/fi_errno.h>
#include <unistd.h>

#include <cerrno>
#include <memory>

#include "ofi/endpoint/endpoint.h"
#include "weft/log.h"

namespace weft::ofi {
namespace {

const char* type_name(int type) {
  return type == NCCL_PTR_CUDA ? "GPU" : "host";
}

// The likely fix for a failed registration, for the log.
std::string registration_hint(const Endpoint& endpoint, const MemorySource& source, int rc) {
  if (source.dmabuf_fd >= 0) {
    return "dma-buf registration needs Linux >= 5.12, a GPU driver and NIC that support it, and "
           "libfabric >= 1.20 with FI_HMEM; set WEFT_DMABUF=0 to register GPU memory by address";
  }
  if (source.type == NCCL_PTR_CUDA) {
    if (rc == -FI_ENOSYS || rc == -FI_EOPNOTSUPP || rc == -FI_EINVAL) {
      return "provider " + endpoint.provider_name() +
             " cannot register CUDA memory here: is this libfabric built with CUDA "
             "(FI_HMEM), and is GPUDirect RDMA available (nvidia-peermem loaded, or dma-buf)?";
    }
    return "check GPUDirect RDMA support (nvidia-peermem or dma-buf) for this GPU and NIC";
  }
  if ((rc == -FI_ENOMEM || rc == -ENOMEM) && endpoint.domain().registration_limit() > 0) {
    return endpoint.device_name() + " allows " +
           std::to_string(endpoint.domain().registration_limit()) +
           " memory regions (fi_info domain_attr mr_cnt; the provider's own buffers count too) "
           "and weft holds " +
           std::to_string(endpoint.domain().registrations_held()) +
           " on it: each buffer NCCL registers takes one, and each comm of the rdma protocol up "
           "to three; keep WEFT_MR_CACHE=1 (registrations of the same pages shared) or open fewer "
           "comms; else check `ulimit -l`";
  }
  if (rc == -FI_ENOMEM || rc == -ENOMEM || rc == -FI_EPERM || rc == -EPERM) {
    return "the locked-memory limit is probably too low: check `ulimit -l` (unlimited is usual on "
           "RDMA hosts)";
  }
  return "check the provider's memory registration limits";
}

}  // namespace

ncclResult_t classify_memory(Endpoint& endpoint, void* data, size_t size, int type,
                             MemorySource* source) {
  *source = MemorySource{};
  return classify_buffer(endpoint.device_name(), endpoint.domain().cuda(),
                         endpoint.domain().gpu_off_reason(), data, size, type, source);
}

ncclResult_t register_memory(Endpoint& endpoint, void* data, size_t size, MemorySource source,
                             void** mhandle) {
  *mhandle = nullptr;
  auto region = std::make_unique<MemoryRegion>();
  region->type = source.type;
  region->base = data;
  region->size = size;
  region->cache = &endpoint.domain().registration_cache();
  if (size == 0 || data == nullptr) {
    *mhandle = region.release();  // nothing to register: no operation will touch it
    return ncclSuccess;
  }

  MrKey key = page_key(data, size, source);
  if (source.dmabuf_fd >= 0) {
    // A dma-buf covers what NCCL exported, no more: register exactly that.
    key.start = reinterpret_cast<uintptr_t>(data);
    key.end = key.start + size;
  } else {
    // GPU allocations need not be page-aligned for the host's page size.
    key = clipped_to_allocation(key, source);
  }

  RegistrationCache& cache = endpoint.domain().registration_cache();
  if (RegistrationCache::Entry* entry = cache.acquire(key)) {
    region->entry = entry;
    region->descriptor = entry->registration.descriptor;
    *mhandle = region.release();
    return ncclSuccess;
  }

  Registration registration;
  const char* failed_call = nullptr;
  int rc = endpoint.register_region(reinterpret_cast<void*>(key.start), key.end - key.start, source,
                                    data, &registration, &failed_call);
  if (rc != 0) {
    WEFT_WARN("%s: registering %zu bytes of %s memory at %p%s failed: %s: %s (%d). %s",
              endpoint.device_name().c_str(), size, type_name(source.type), data,
              source.type == NCCL_PTR_CUDA ? (" (CUDA device " + std::to_string(source.device) +
                                              (source.dmabuf_fd >= 0 ? ", dma-buf" : "") + ")")
                                                 .c_str()
                                           : "",
              failed_call, fi_strerror(-rc), rc, registration_hint(endpoint, source, rc).c_str());
    return source.type == NCCL_PTR_CUDA ? ncclUnhandledCudaError : ncclSystemError;
  }
  region->entry = cache.insert(key, registration);
  if (region->entry == nullptr) region->own = registration;
  region->descriptor = registration.descriptor;
  *mhandle = region.release();
  return ncclSuccess;
}

ncclResult_t deregister_memory(Endpoint* endpoint, const std::string& device_name, void* mhandle) {
  if (mhandle == nullptr) return ncclSuccess;
  auto* region = static_cast<MemoryRegion*>(mhandle);
  if (region->magic != MemoryRegion::kMagic) {
    WEFT_WARN("%s: deregMr called with an invalid handle %p (already deregistered?)",
              device_name.c_str(), mhandle);
    return ncclInvalidArgument;
  }
  region->magic = 0;
  Registration last;
  if (region->entry != nullptr) {
    if (!region->cache->release(region->entry, &last)) last = Registration{};
  } else {
    last = region->own;
  }
  ncclResult_t result = ncclSuccess;
  if (last.mr != nullptr) {
    int rc =
        endpoint != nullptr ? endpoint->domain().close_region(last.mr) : fi_close(&last.mr->fid);
    if (rc != 0) {
      WEFT_WARN("%s: deregistering memory at %p failed: %s", device_name.c_str(), region->base,
                fi_strerror(-rc));
      result = ncclSystemError;
    }
  }
  delete region;
  return result;
}

}  // namespace weft::ofi
