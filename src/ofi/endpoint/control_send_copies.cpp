#include "ofi/endpoint/control_send_copies.h"

#include <rdma/fi_errno.h>

#include <algorithm>
#include <new>

#include "ofi/endpoint/endpoint.h"
#include "weft/log.h"

namespace weft::ofi {

ControlSendCopies::ControlSendCopies(Endpoint& endpoint, size_t copy_size, int limit)
    : endpoint_(endpoint),
      // Cache-line aligned: two sends in flight never share a line.
      copy_size_((copy_size + 63) & ~size_t{63}),
      limit_(std::clamp((limit + kChunk - 1) / kChunk * kChunk, kChunk, kMaxCopies)) {}

ControlSendCopies::~ControlSendCopies() {
  const int chunks = chunks_.load(std::memory_order_acquire);
  for (int c = 0; c < chunks; ++c) {
    if (chunk_[c].mr != nullptr) endpoint_.domain().close_region(chunk_[c].mr);
  }
}

ControlSendCopies::Take ControlSendCopies::take(Copy* out) {
  for (;;) {
    const int chunks = chunks_.load(std::memory_order_acquire);
    const int index = claims_.claim(static_cast<size_t>(chunks) * kChunk);
    if (index >= 0) {
      const Chunk& chunk = chunk_[index / kChunk];
      out->index = index;
      out->bytes = chunk.bytes.get() + static_cast<size_t>(index % kChunk) * copy_size_;
      out->descriptor = chunk.descriptor;
      return Take::kTaken;
    }
    if (chunks * kChunk >= limit_) return Take::kNone;
    const Take grown = add_chunk(chunks);
    if (grown != Take::kTaken) return grown;
  }
}

ControlSendCopies::Take ControlSendCopies::add_chunk(int seen) {
  std::lock_guard<std::mutex> lock(grow_mutex_);
  const int chunks = chunks_.load(std::memory_order_relaxed);
  if (chunks != seen) return Take::kTaken;  // another thread added one: claim again
  Chunk& chunk = chunk_[chunks];
  const size_t size = copy_size_ * kChunk;
  chunk.bytes.reset(new (std::nothrow) uint8_t[size]);
  if (!chunk.bytes) {
    WEFT_WARN("%s: no memory for %d control message copies (%zu bytes)",
              endpoint_.device_name().c_str(), kChunk, size);
    return Take::kFailed;
  }
  Registration registration;
  const char* failed_call = nullptr;
  const int rc = endpoint_.register_region(chunk.bytes.get(), size, MemorySource{},
                                           chunk.bytes.get(), &registration, &failed_call);
  if (rc != 0) {
    WEFT_WARN("%s: registering %d control message copies failed in %s: %s",
              endpoint_.device_name().c_str(), kChunk, failed_call, fi_strerror(-rc));
    chunk.bytes.reset();
    return Take::kFailed;
  }
  chunk.mr = registration.mr;
  chunk.descriptor = registration.descriptor;
  chunks_.store(chunks + 1, std::memory_order_release);
  return Take::kTaken;
}

}  // namespace weft::ofi
