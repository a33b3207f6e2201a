#include "ofi/endpoint/domain.h"

#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>

#include <algorithm>

#include "weft/log.h"

namespace weft::ofi {

ncclResult_t Domain::open(const fi_info* info, const std::string& device_name,
                          const DomainOptions& options) {
  device_name_ = device_name;
  mr_mode_ = info->domain_attr->mr_mode;
  mr_limit_ = info->domain_attr->mr_cnt;
  registration_cache_ = std::make_unique<RegistrationCache>(
      options.mr_cache, static_cast<size_t>(std::max(options.mr_cache_max_entries, 1)));
  cuda_ = options.cuda;
  gpu_memory_ = options.cuda != nullptr;
  gpu_off_reason_ = options.gpu_off_reason;
  dmabuf_ = options.dmabuf && options.cuda != nullptr;
  flush_ = options.flush;

  fid_fabric* fabric = nullptr;
  int rc = fi_fabric(info->fabric_attr, &fabric, nullptr);
  if (rc != 0) {
    WEFT_WARN("%s: fi_fabric failed: %s (%d)", device_name_.c_str(), fi_strerror(-rc), rc);
    return ncclSystemError;
  }
  fabric_.reset(fabric);
  fid_domain* domain = nullptr;
  rc = fi_domain(fabric, const_cast<fi_info*>(info), &domain, nullptr);
  if (rc != 0) {
    WEFT_WARN("%s: fi_domain failed: %s (%d)", device_name_.c_str(), fi_strerror(-rc), rc);
    return ncclSystemError;
  }
  domain_.reset(domain);
  return ncclSuccess;
}

Domain::~Domain() {
  if (registration_cache_) {
    MrCacheStats stats = registration_cache_->stats();
    if (stats.lookups > 0) {
      WEFT_INFO(NCCL_NET,
                "%s: registration cache: %llu lookups, %llu hits, %llu registered, %llu uncached, "
                "%llu still registered",
                device_name_.c_str(), (unsigned long long)stats.lookups,
                (unsigned long long)stats.hits, (unsigned long long)stats.inserts,
                (unsigned long long)stats.uncached, (unsigned long long)stats.live);
    }
  }
  if (domain_) {
    int rc = fi_close(&domain_.release()->fid);
    if (rc != 0) {
      WEFT_WARN("%s: closing the domain failed: %s (memory still registered?)",
                device_name_.c_str(), fi_strerror(-rc));
    }
  }
  fabric_.reset();
}

int Domain::register_region(void* start, size_t length, const MemorySource& source,
                            const void* data, uint64_t access, fid_ep* endpoint, Registration* out,
                            const char** failed_call) {
  iovec iov{start, length};
  fi_mr_attr attr{};
  attr.mr_iov = &iov;
  attr.iov_count = 1;
  attr.access = access;
  attr.requested_key = mr_key_.fetch_add(1, std::memory_order_relaxed);
  attr.iface = FI_HMEM_SYSTEM;
  if (source.type == NCCL_PTR_CUDA) {
    attr.iface = FI_HMEM_CUDA;
    attr.device.cuda = source.device;
  }
  uint64_t flags = 0;
  if (source.type == NCCL_PTR_CUDA) {
    // cudaMalloc'd memory is never host-accessible; saying so lets shm map
    // it with CUDA IPC instead of copying through bounce buffers.
    flags |= FI_HMEM_DEVICE_ONLY;
  }
#ifdef FI_MR_DMABUF
  fi_mr_dmabuf dmabuf{};
  if (source.dmabuf_fd >= 0) {
    // base_addr is where offset 0 of the dma-buf is mapped.
    dmabuf.fd = source.dmabuf_fd;
    dmabuf.offset = source.dmabuf_offset;
    dmabuf.len = length;
    dmabuf.base_addr = static_cast<uint8_t*>(const_cast<void*>(data)) - source.dmabuf_offset;
    attr.dmabuf = &dmabuf;
    flags |= FI_MR_DMABUF;
  }
#else
  (void)data;
#endif
  std::lock_guard<std::mutex> lock(io_mutex_);
  if (mr_limit_ > 0 && regions_held_ >= mr_limit_) {
    // Past it the device refuses, or worse, fails a later provider call.
    *failed_call = "the provider's registration limit";
    return -FI_ENOMEM;
  }
  fid_mr* mr = nullptr;
  *failed_call = "fi_mr_regattr";
  int rc = fi_mr_regattr(domain_.get(), &attr, flags, &mr);
  if (rc != 0) return rc;
  if ((mr_mode_ & FI_MR_ENDPOINT) != 0 && endpoint != nullptr) {
    // Such providers scope MRs to an endpoint and want them enabled.
    *failed_call = "fi_mr_bind";
    rc = fi_mr_bind(mr, &endpoint->fid, 0);
    if (rc == 0) {
      *failed_call = "fi_mr_enable";
      rc = fi_mr_enable(mr);
    }
    if (rc != 0) {
      fi_close(&mr->fid);
      return rc;
    }
  }
  out->mr = mr;
  out->descriptor = fi_mr_desc(mr);
  out->key = fi_mr_key(mr);
  out->start = reinterpret_cast<uintptr_t>(start);
  ++regions_held_;
  return 0;
}

int Domain::close_region(fid_mr* mr) {
  std::lock_guard<std::mutex> lock(io_mutex_);
  int rc = fi_close(&mr->fid);
  if (rc == 0) --regions_held_;
  return rc;
}

size_t Domain::registrations_held() const {
  std::lock_guard<std::mutex> lock(io_mutex_);
  return regions_held_;
}

}  // namespace weft::ofi
