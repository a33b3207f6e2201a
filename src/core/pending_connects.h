// NCCL's connect() must not block: it returns a NULL comm until the peer
// answered and is called again with the same handle buffer. The comm being
// built is parked here under a cookie that connect() writes into the
// caller's copy of the handle, so the next call finds it again.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <random>
#include <unordered_map>

namespace weft {

// At most this many connects are set up at once per transport; later ones
// return a NULL comm (NCCL calls again) until earlier ones finish. A burst
// of thousands of connect requests at once outran the listener's 512 pool
// buffers, and libfabric 1.17's shm lost what waited unexpected: 512
// requests sent and never delivered (docs/scale.md, Provider limits).
constexpr size_t kMaxConnectsInFlight = 256;

template <typename PendingComm>
class PendingConnects {
 public:
  PendingConnects() {
    // Cookies from another process or an earlier transport must not match.
    std::random_device random;
    base_ = (static_cast<uint64_t>(random()) << 32) ^
            static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
  }
  PendingConnects(const PendingConnects&) = delete;
  PendingConnects& operator=(const PendingConnects&) = delete;

  // A cookie never handed out before in this process, never 0.
  uint64_t new_cookie() {
    std::lock_guard<std::mutex> lock(mutex_);
    uint64_t cookie = base_ + next_++;
    return cookie != 0 ? cookie : base_ + next_++;
  }

  // The comm parked under `cookie`, removed from the map; null if none.
  std::unique_ptr<PendingComm> take(uint64_t cookie) {
    if (cookie == 0) return nullptr;
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = pending_.find(cookie);
    if (it == pending_.end()) return nullptr;
    std::unique_ptr<PendingComm> comm = std::move(it->second);
    pending_.erase(it);
    return comm;
  }

  // Whether a new connect must wait for one of those parked to finish.
  bool full() {
    std::lock_guard<std::mutex> lock(mutex_);
    return pending_.size() >= kMaxConnectsInFlight;
  }

  void park(uint64_t cookie, std::unique_ptr<PendingComm> comm) {
    std::lock_guard<std::mutex> lock(mutex_);
    pending_.emplace(cookie, std::move(comm));
  }

  // Hands every parked comm to `abandon` (the transport is closing).
  template <typename Abandon>
  void abandon_all(Abandon&& abandon) {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto& entry : pending_) abandon(entry.second.release());
    pending_.clear();
  }

 private:
  std::mutex mutex_;
  std::unordered_map<uint64_t, std::unique_ptr<PendingComm>> pending_;
  uint64_t base_ = 0;
  uint64_t next_ = 1;
};

}  // namespace weft
