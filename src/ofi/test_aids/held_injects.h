// Test aid (WEFT_OFI_TEST_HOLD_INJECTS): libfabric's tcp provider queues an
// inject behind a send or write still leaving the socket, and the poll
// that reports that send's completion may return with the inject still
// queued (the socket full); only a later call sends it. This holds such
// injects in weft the same way, until the poll after the one that read the
// last outstanding send's completion, so a sender that stops calling once
// NCCL saw its requests complete strands them every time, not once in a
// hundred runs (functional.*.quiet_sender).
#pragma once

#include <rdma/fabric.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <deque>
#include <vector>

namespace weft::ofi {

class HeldInjects {
 public:
  void configure(bool active) { active_ = active; }
  bool active() const { return active_; }

  // A send, write or read that reports a completion was posted; one such
  // completion (or error) was read.
  void tracked_posted() { ++in_flight_; }
  void tracked_done() {
    if (in_flight_ > 0 && --in_flight_ == 0 && !held_.empty()) release_next_poll_ = true;
  }

  // True (a copy kept) when an inject must wait: a tracked operation is
  // still in flight, or earlier injects wait (the queue keeps its order).
  bool hold(const void* buffer, size_t size, uint64_t data, fi_addr_t peer, uint64_t tag) {
    if (in_flight_ == 0 && held_.empty()) return false;
    Held held;
    held.bytes.resize(size);
    if (size > 0) std::memcpy(held.bytes.data(), buffer, size);
    held.data = data;
    held.peer = peer;
    held.tag = tag;
    held_.push_back(std::move(held));
    return true;
  }

  // At the start of a poll: hands the held injects to `post(bytes, size,
  // data, peer, tag)` (which returns the provider's result) once their
  // release is due, stopping at EAGAIN.
  template <typename Post>
  void release(Post&& post) {
    if (!release_next_poll_) {
      return;
    }
    while (!held_.empty()) {
      const Held& held = held_.front();
      if (post(held.bytes.data(), held.bytes.size(), held.data, held.peer, held.tag) != 0) return;
      held_.pop_front();
    }
    release_next_poll_ = false;
  }

 private:
  struct Held {
    std::vector<uint8_t> bytes;
    uint64_t data = 0;
    fi_addr_t peer = 0;
    uint64_t tag = 0;
  };
  bool active_ = false;
  int in_flight_ = 0;
  bool release_next_poll_ = false;
  std::deque<Held> held_;
};

}  // namespace weft::ofi
