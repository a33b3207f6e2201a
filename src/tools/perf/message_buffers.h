// Memory for the messages of one comm: a send arena and a receive arena,
// each page-aligned and registered once for the whole sweep. A size step uses
// `slots(size)` page-aligned slots of each (up to --depth, within
// --buffer-bytes), plus a control slot for acknowledgements.
//
// Host memory (--mem host): the arenas are anonymous mmaps registered as
// NCCL_PTR_HOST, and the control slot is a page at the end of each arena
// (raw RMA writes rely on both ranks' arenas matching, control slot
// included). GPU memory (--mem cuda): the arenas are cuMemAlloc'ed on GPU 0
// and registered as NCCL_PTR_CUDA (regMrDmaBuf with --dmabuf); the control
// slots are a separate host page per direction, registered as
// NCCL_PTR_HOST, and pattern fills, poisoning and checks go through a host
// staging buffer and driver copies (the host never touches GPU memory).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "backend.h"
#include "gpu_buffer.h"
#include "host_buffer.h"

namespace weft::cuda {
class Driver;
}

namespace weft::perf {

struct Options;

class MessageBuffers {
 public:
  // The layout depends only on the options and sizes, so both ranks' arenas
  // match slot for slot (raw RMA writes rely on that). `driver`: required
  // with --mem cuda, ignored otherwise.
  MessageBuffers(Backend& backend, int comm, const Options& opts, const std::vector<size_t>& sizes,
                 const cuda::Driver* driver = nullptr);

  size_t slots(size_t size) const;
  char* send_slot(size_t size, size_t slot) const { return send_data_ + slot * stride(size); }
  char* recv_slot(size_t size, size_t slot) const { return recv_data_ + slot * stride(size); }
  void* send_mr() const { return send_mr_.handle(); }
  void* recv_mr() const { return recv_mr_.handle(); }
  // Acknowledgements: kCtrlBytes in host memory, with their own handles.
  char* send_ctrl() const { return send_ctrl_; }
  char* recv_ctrl() const { return recv_ctrl_; }
  void* send_ctrl_mr() const { return gpu() ? send_ctrl_mr_.handle() : send_mr(); }
  void* recv_ctrl_mr() const { return gpu() ? recv_ctrl_mr_.handle() : recv_mr(); }
  // Message slots are in GPU memory: receives are flushed (iflush).
  bool gpu() const { return gpu_; }

  // Before a size step (when checking): the send slots get this rank's
  // pattern, the receive slots a poison value.
  void fill_send(int rank, size_t size, size_t nslots) const;
  void poison_recv(size_t size, size_t nslots) const;
  // After it: offset of the first byte of receive slot `slot` that differs
  // from the pattern `key`, or SIZE_MAX; *got is the byte found there.
  size_t find_recv_mismatch(size_t size, size_t slot, uint64_t key, uint8_t* got) const;

  static constexpr size_t kCtrlBytes = 8;

 private:
  static size_t stride(size_t size);
  size_t arena_bytes(const std::vector<size_t>& sizes) const;
  ScopedRegistration register_arena(Backend& backend, int comm, Direction dir, char* data,
                                    size_t size, const GpuBuffer* gpu, bool dmabuf);

  size_t buffer_bytes_;
  size_t depth_;
  bool gpu_;
  size_t ctrl_offset_ = 0;
  // Host arenas (control slot at the end), or GPU arenas plus control pages.
  HostBuffer send_host_;
  HostBuffer recv_host_;
  GpuBuffer send_gpu_;
  GpuBuffer recv_gpu_;
  HostBuffer ctrl_host_;  // GPU mode: [send ctrl page][recv ctrl page]
  HostBuffer staging_;    // GPU mode: host side of fills and checks
  char* send_data_ = nullptr;
  char* recv_data_ = nullptr;
  char* send_ctrl_ = nullptr;
  char* recv_ctrl_ = nullptr;
  ScopedRegistration send_mr_;
  ScopedRegistration recv_mr_;
  ScopedRegistration send_ctrl_mr_;
  ScopedRegistration recv_ctrl_mr_;
};

}  // namespace weft::perf
