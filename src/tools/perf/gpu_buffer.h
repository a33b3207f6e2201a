// GPU memory for weft-perf --mem cuda: cuMemAlloc on a GPU through weft's
// run-time CUDA driver loader, freed on scope exit. The host never
// dereferences it: contents go in and out by copies (write/read), so the same
// code runs on a real GPU and on the softcuda test double.
#pragma once

#include <cstddef>
#include <utility>

#include "core/fd.h"

namespace weft::cuda {
class Driver;
}

namespace weft::perf {

class GpuBuffer {
 public:
  GpuBuffer() = default;
  // `size` bytes (rounded up to whole pages) on GPU `ordinal`; throws PerfError.
  GpuBuffer(const cuda::Driver& driver, size_t size, int ordinal = 0);
  GpuBuffer(GpuBuffer&& o) noexcept
      : driver_(std::exchange(o.driver_, nullptr)),
        data_(std::exchange(o.data_, nullptr)),
        size_(std::exchange(o.size_, 0)) {}
  GpuBuffer& operator=(GpuBuffer&& o) noexcept {
    std::swap(driver_, o.driver_);
    std::swap(data_, o.data_);
    std::swap(size_, o.size_);
    return *this;
  }
  GpuBuffer(const GpuBuffer&) = delete;
  GpuBuffer& operator=(const GpuBuffer&) = delete;
  ~GpuBuffer();

  char* data() const { return data_; }
  size_t size() const { return size_; }  // whole pages

  // Host <-> GPU copies at `offset` into the buffer; throw PerfError.
  void write(size_t offset, const void* src, size_t n) const;
  void read(size_t offset, void* dst, size_t n) const;
  // A new dma-buf fd for the whole buffer (cuMemGetHandleForAddressRange).
  Fd export_dmabuf() const;

 private:
  const cuda::Driver* driver_ = nullptr;
  char* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace weft::perf
