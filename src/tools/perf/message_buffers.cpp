#include "message_buffers.h"

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "data_check.h"
#include "errors.h"
#include "options.h"

namespace weft::perf {
namespace {
constexpr size_t kPage = 4096;
// GPU mode: messages are filled and checked through this much host memory
// at a time (a multiple of 8, as fill_pattern_at/find_mismatch_at need).
constexpr size_t kStagingBytes = size_t{4} << 20;
size_t round_up(size_t v, size_t to) {
  return (v + to - 1) / to * to;
}
}  // namespace

size_t MessageBuffers::stride(size_t size) {
  return round_up(std::max<size_t>(size, 1), kPage);
}

size_t MessageBuffers::slots(size_t size) const {
  return std::clamp<size_t>(buffer_bytes_ / stride(size), 1, depth_);
}

MessageBuffers::MessageBuffers(Backend& backend, int comm, const Options& opts,
                               const std::vector<size_t>& sizes, const cuda::Driver* driver)
    : buffer_bytes_(opts.buffer_bytes),
      depth_(static_cast<size_t>(opts.depth)),
      gpu_(opts.mem == MemType::cuda),
      ctrl_offset_(arena_bytes(sizes)) {
  if (gpu_) {
    if (driver == nullptr) throw PerfError("--mem cuda: no CUDA driver");
    send_gpu_ = GpuBuffer(*driver, ctrl_offset_);
    recv_gpu_ = GpuBuffer(*driver, ctrl_offset_);
    ctrl_host_ = HostBuffer(2 * kPage);
    staging_ = HostBuffer(std::min(kStagingBytes, ctrl_offset_));
    send_data_ = send_gpu_.data();
    recv_data_ = recv_gpu_.data();
    send_ctrl_ = ctrl_host_.data();
    recv_ctrl_ = ctrl_host_.data() + kPage;
  } else {
    send_host_ = HostBuffer(ctrl_offset_ + kPage);
    recv_host_ = HostBuffer(ctrl_offset_ + kPage);
    send_data_ = send_host_.data();
    recv_data_ = recv_host_.data();
    send_ctrl_ = send_data_ + ctrl_offset_;
    recv_ctrl_ = recv_data_ + ctrl_offset_;
  }
  send_mr_ = register_arena(backend, comm, Direction::send, send_data_,
                            gpu_ ? send_gpu_.size() : send_host_.size(), &send_gpu_, opts.dmabuf);
  recv_mr_ = register_arena(backend, comm, Direction::recv, recv_data_,
                            gpu_ ? recv_gpu_.size() : recv_host_.size(), &recv_gpu_, opts.dmabuf);
  if (gpu_) {
    send_ctrl_mr_ = ScopedRegistration(backend, comm, Direction::send, send_ctrl_, kPage);
    recv_ctrl_mr_ = ScopedRegistration(backend, comm, Direction::recv, recv_ctrl_, kPage);
  }
}

ScopedRegistration MessageBuffers::register_arena(Backend& backend, int comm, Direction dir,
                                                  char* data, size_t size, const GpuBuffer* gpu,
                                                  bool dmabuf) {
  if (!gpu_) return ScopedRegistration(backend, comm, dir, data, size);
  if (!dmabuf) return ScopedRegistration(backend, comm, dir, data, size, MemoryKind::cuda);
  Fd fd = gpu->export_dmabuf();  // closed right after the call, as NCCL does
  return ScopedRegistration(backend, comm, dir, data, size, /*offset=*/0, fd.get());
}

size_t MessageBuffers::arena_bytes(const std::vector<size_t>& sizes) const {
  size_t arena = kPage;
  for (size_t s : sizes) arena = std::max(arena, slots(s) * stride(s));
  return arena;
}

void MessageBuffers::fill_send(int rank, size_t size, size_t nslots) const {
  for (size_t i = 0; i < nslots; ++i) {
    const uint64_t key = pattern_key(rank, size, i);
    if (!gpu_) {
      fill_pattern(send_slot(size, i), size, key);
      continue;
    }
    const size_t offset = static_cast<size_t>(send_slot(size, i) - send_data_);
    for (size_t at = 0; at < size; at += staging_.size()) {
      const size_t n = std::min(staging_.size(), size - at);
      fill_pattern_at(staging_.data(), n, key, at);
      send_gpu_.write(offset + at, staging_.data(), n);
    }
  }
}

void MessageBuffers::poison_recv(size_t size, size_t nslots) const {
  if (!gpu_) {
    for (size_t i = 0; i < nslots; ++i) poison(recv_slot(size, i), size);
    return;
  }
  poison(staging_.data(), staging_.size());
  for (size_t i = 0; i < nslots; ++i) {
    const size_t offset = static_cast<size_t>(recv_slot(size, i) - recv_data_);
    for (size_t at = 0; at < size; at += staging_.size()) {
      recv_gpu_.write(offset + at, staging_.data(), std::min(staging_.size(), size - at));
    }
  }
}

size_t MessageBuffers::find_recv_mismatch(size_t size, size_t slot, uint64_t key,
                                          uint8_t* got) const {
  const char* buf = recv_slot(size, slot);
  if (!gpu_) {
    size_t off = find_mismatch(buf, size, key);
    if (off != SIZE_MAX) *got = static_cast<uint8_t>(buf[off]);
    return off;
  }
  const size_t offset = static_cast<size_t>(buf - recv_data_);
  for (size_t at = 0; at < size; at += staging_.size()) {
    const size_t n = std::min(staging_.size(), size - at);
    recv_gpu_.read(offset + at, staging_.data(), n);
    size_t off = find_mismatch_at(staging_.data(), n, key, at);
    if (off != SIZE_MAX) {
      *got = static_cast<uint8_t>(staging_.data()[off]);
      return at + off;
    }
  }
  return SIZE_MAX;
}

}  // namespace weft::perf
