// Memory registration on the endpoint's domain (the handles NCCL holds
// are made in memory_region.cpp).
#include <rdma/fi_domain.h>

#include "ofi/endpoint/endpoint.h"

namespace weft::ofi {

int Endpoint::register_region(void* start, size_t length, const MemorySource& source,
                              const void* data, Registration* out, const char** failed_call) {
  iovec iov{start, length};
  fi_mr_attr attr{};
  attr.mr_iov = &iov;
  attr.iov_count = 1;
  // Reads serve the flush (the NIC reads back what it wrote).
  attr.access = FI_SEND | FI_RECV | (rma_ ? (FI_READ | FI_REMOTE_READ) : 0) |
                (rdma_ || one_sided_ ? (FI_WRITE | FI_REMOTE_WRITE) : 0);
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
  if ((mr_mode_ & FI_MR_ENDPOINT) != 0) {
    // Such providers scope MRs to an endpoint and want them enabled.
    *failed_call = "fi_mr_bind";
    rc = fi_mr_bind(mr, &ep_->fid, 0);
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

int Endpoint::close_region(fid_mr* mr) {
  std::lock_guard<std::mutex> lock(io_mutex_);
  int rc = fi_close(&mr->fid);
  if (rc == 0) --regions_held_;
  return rc;
}

size_t Endpoint::registrations_held() const {
  std::lock_guard<std::mutex> lock(io_mutex_);
  return regions_held_;
}

}  // namespace weft::ofi
