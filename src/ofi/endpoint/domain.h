// A libfabric domain opened for one device: fabric and domain, memory
// registration on it (the registration cache, keys, the provider's limit),
// what the device does with GPU memory, and the lock every call into the
// domain and the objects opened on it takes. The domain is opened
// FI_THREAD_DOMAIN, so that lock is the domain's: one uncontended lock is
// cheaper than the provider's own thread-safe mode, and some providers
// (rxd) deadlock in that mode. The endpoint (endpoint.h) holds one, opened
// first and closed last.
#pragma once

#include <rdma/fabric.h>
#include <rdma/fi_domain.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "core/flush_method.h"
#include "nccl/types.h"
#include "ofi/endpoint/registration.h"
#include "ofi/fabric/fabric_ptr.h"

namespace weft::cuda {
class Driver;
}

namespace weft::ofi {

struct DomainOptions {
  bool mr_cache = true;
  int mr_cache_max_entries = 65536;
  // GPU memory: the driver when CUDA registration works on this device.
  const cuda::Driver* cuda = nullptr;
  std::string gpu_off_reason = "GPU memory support is off";
  bool dmabuf = false;  // dma-buf registration probed to work
  FlushMethod flush = FlushMethod::None;
};

class Domain {
 public:
  Domain() = default;
  ~Domain();
  Domain(const Domain&) = delete;
  Domain& operator=(const Domain&) = delete;

  // Opens the fabric and the domain of `info`; logs the call that failed,
  // naming the device.
  ncclResult_t open(const fi_info* info, const std::string& device_name,
                    const DomainOptions& options);
  fid_domain* get() const { return domain_.get(); }
  // Held around every call into the domain and what was opened on it.
  std::mutex& io_mutex() const { return io_mutex_; }

  // Registers [start, start + length) as `source` describes (`data` is
  // where NCCL's buffer begins, for dma-buf offsets) with `access`; binds
  // it to `endpoint` where the provider scopes registrations to one
  // (FI_MR_ENDPOINT). On failure returns the provider's negative error and
  // the call that failed.
  int register_region(void* start, size_t length, const MemorySource& source, const void* data,
                      uint64_t access, fid_ep* endpoint, Registration* out,
                      const char** failed_call);
  int close_region(fid_mr* mr);
  RegistrationCache& registration_cache() { return *registration_cache_; }
  // The provider's limit on registrations (fi_info mr_cnt, 0 where it
  // states none) and those weft holds on this domain.
  size_t registration_limit() const { return mr_limit_; }
  size_t registrations_held() const;
  uint64_t mr_mode() const { return mr_mode_; }

  // GPU memory on this device.
  const cuda::Driver* cuda() const { return gpu_memory_ ? cuda_ : nullptr; }
  bool gpu_memory() const { return gpu_memory_; }
  bool dmabuf() const { return dmabuf_; }
  const std::string& gpu_off_reason() const { return gpu_off_reason_; }
  FlushMethod flush_method() const { return flush_; }

 private:
  FabricPtr<fid_fabric> fabric_;
  FabricPtr<fid_domain> domain_;
  std::string device_name_;
  std::unique_ptr<RegistrationCache> registration_cache_;
  uint64_t mr_mode_ = 0;
  size_t mr_limit_ = 0;
  size_t regions_held_ = 0;  // io_mutex_
  std::atomic<uint64_t> mr_key_{1};
  const cuda::Driver* cuda_ = nullptr;
  bool gpu_memory_ = false;
  bool dmabuf_ = false;
  std::string gpu_off_reason_;
  FlushMethod flush_ = FlushMethod::None;
  mutable std::mutex io_mutex_;
};

}  // namespace weft::ofi
