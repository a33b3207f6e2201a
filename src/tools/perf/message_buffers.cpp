#include "message_buffers.h"

#include <algorithm>

#include "data_check.h"
#include "options.h"

namespace weft::perf {
namespace {
constexpr size_t kPage = 4096;
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

MessageBuffers::MessageBuffers(Transport& transport, int comm, const Options& opts,
                               const std::vector<size_t>& sizes)
    : buffer_bytes_(opts.buffer_bytes),
      depth_(static_cast<size_t>(opts.depth)),
      ctrl_offset_(arena_bytes(sizes)),
      send_(ctrl_offset_ + kPage),
      recv_(ctrl_offset_ + kPage),
      send_mr_(transport, comm, Direction::send, send_.data(), send_.size()),
      recv_mr_(transport, comm, Direction::recv, recv_.data(), recv_.size()) {}

size_t MessageBuffers::arena_bytes(const std::vector<size_t>& sizes) const {
  size_t arena = kPage;
  for (size_t s : sizes) arena = std::max(arena, slots(s) * stride(s));
  return arena;
}

void MessageBuffers::fill_send(int rank, size_t size, size_t nslots) const {
  for (size_t i = 0; i < nslots; ++i)
    fill_pattern(send_slot(size, i), size, pattern_key(rank, size, i));
}

void MessageBuffers::poison_recv(size_t size, size_t nslots) const {
  for (size_t i = 0; i < nslots; ++i) poison(recv_slot(size, i), size);
}

}  // namespace weft::perf
