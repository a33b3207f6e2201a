#include "gpu_buffer.h"

#include <string>

#include "core/cuda/cuda_driver.h"
#include "errors.h"

namespace weft::perf {
namespace {
constexpr size_t kPage = 4096;
}

GpuBuffer::GpuBuffer(const cuda::Driver& driver, size_t size, int ordinal)
    : driver_(&driver), size_((size + kPage - 1) / kPage * kPage) {
  if (size_ == 0) size_ = kPage;
  void* p = nullptr;
  std::string error;
  if (!driver.alloc(size_, ordinal, &p, &error)) {
    throw PerfError("--mem cuda: cannot allocate " + std::to_string(size_) + " bytes on GPU " +
                    std::to_string(ordinal) + ": " + error +
                    " (lower --buffer-bytes or --max-bytes)");
  }
  data_ = static_cast<char*>(p);
}

GpuBuffer::~GpuBuffer() {
  if (data_ != nullptr) {
    std::string error;
    driver_->free(data_, &error);  // nothing to do about a failure here
  }
}

void GpuBuffer::write(size_t offset, const void* src, size_t n) const {
  std::string error;
  if (!driver_->copy_to_device(data_ + offset, src, n, &error)) {
    throw PerfError("--mem cuda: copy of " + std::to_string(n) +
                    " bytes to the GPU failed: " + error);
  }
}

void GpuBuffer::read(size_t offset, void* dst, size_t n) const {
  std::string error;
  if (!driver_->copy_to_host(dst, data_ + offset, n, &error)) {
    throw PerfError("--mem cuda: copy of " + std::to_string(n) +
                    " bytes from the GPU failed: " + error);
  }
}

Fd GpuBuffer::export_dmabuf() const {
  int fd = -1;
  std::string error;
  if (!driver_->export_dmabuf(data_, size_, &fd, &error)) {
    throw PerfError("--dmabuf: cannot export a dma-buf for " + std::to_string(size_) +
                    " bytes of GPU memory: " + error + " (drop --dmabuf to register with regMr)");
  }
  return Fd(fd);
}

}  // namespace weft::perf
