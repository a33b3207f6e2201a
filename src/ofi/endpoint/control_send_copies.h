// Registered copies of the control messages a provider cannot inject (the
// receiver's clear-to-sends on tcp;ofi_rxm), shared by every comm of an
// endpoint and bounded. Per comm they cost 32 registered copies that NCCL's
// traffic touches on every comm; unbounded, a burst of comms sending at once
// also grows the provider's own send buffers by one each (tcp;ofi_rxm: 16 KiB
// per send in flight, kept for the life of the endpoint). With a bound, a
// clear-to-send waits for a copy instead, as it waits for a full send queue.
#pragma once

#include <rdma/fi_domain.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>

#include "nccl/types.h"
#include "ofi/endpoint/slot_claims.h"

namespace weft::ofi {

class Endpoint;

class ControlSendCopies {
 public:
  // Copies are registered kChunk at a time, when all before are taken.
  static constexpr int kChunk = 64;
  static constexpr int kMaxCopies = 4096;

  // `limit` copies at most (rounded up to whole chunks), `copy_size` bytes each.
  ControlSendCopies(Endpoint& endpoint, size_t copy_size, int limit);
  ~ControlSendCopies();
  ControlSendCopies(const ControlSendCopies&) = delete;
  ControlSendCopies& operator=(const ControlSendCopies&) = delete;

  struct Copy {
    int index = -1;
    uint8_t* bytes = nullptr;
    void* descriptor = nullptr;
  };
  // A free copy in *out; kNone when every one is on its way (a later call
  // tries again), an error when a new chunk cannot be allocated or
  // registered.
  enum class Take { kTaken, kNone, kFailed };
  Take take(Copy* out);
  // The provider is done with copy `index` (its send completed or failed).
  void give_back(int index) { claims_.release(index); }

  size_t copy_size() const { return copy_size_; }
  int limit() const { return limit_; }
  // Copies taken now (tests).
  size_t taken() const { return claims_.count(); }
  int chunks() const { return chunks_.load(std::memory_order_acquire); }

 private:
  static constexpr int kMaxChunks = kMaxCopies / kChunk;
  Take add_chunk(int seen);

  struct Chunk {
    std::unique_ptr<uint8_t[]> bytes;
    fid_mr* mr = nullptr;
    void* descriptor = nullptr;
  };
  Endpoint& endpoint_;
  const size_t copy_size_;
  const int limit_;
  SlotClaims<kMaxCopies> claims_;
  Chunk chunk_[kMaxChunks];
  std::atomic<int> chunks_{0};  // chunk_[0, chunks_) ready
  std::mutex grow_mutex_;
};

}  // namespace weft::ofi
