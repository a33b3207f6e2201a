// Closing a comm that may still have operations in flight: cancel what can
// be cancelled, drive progress for a bounded time, then either delete the
// comm or hand it to whoever keeps its memory valid until no completion can
// reach it any more (the transport's endpoint or queue pair).
#pragma once

#include <chrono>
#include <memory>

#include "core/idle_backoff.h"
#include "weft/transport.h"

namespace weft {

// Something that drives completions (a completion queue).
class Poller {
 public:
  virtual ncclResult_t poll() = 0;

 protected:
  ~Poller() = default;
};

// Keeps closed comms alive until it closes itself.
class OrphanKeeper {
 public:
  virtual void adopt(std::unique_ptr<Comm> orphan) = 0;

 protected:
  ~OrphanKeeper() = default;
};

// Polls until `idle()` or `timeout_ms` passed; true when idle.
template <typename Idle>
bool drain(Poller& poller, int timeout_ms, Idle&& idle) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  IdleBackoff backoff;
  while (!idle()) {
    if (poller.poll() != ncclSuccess) return false;
    if (std::chrono::steady_clock::now() >= deadline) return idle();
    backoff.pause();
  }
  return true;
}

// Deletes `comm` once idle, or leaves it to `keeper` after `timeout_ms`.
// `detach` runs first in that case: the comm must drop its own reference to
// the keeper, or the two would keep each other alive. The caller must hold
// a reference to `keeper` across the call. Returns true when deleted.
template <typename Idle, typename Detach>
bool finish_close(Comm* comm, Poller& poller, OrphanKeeper& keeper, int timeout_ms, Idle&& idle,
                  Detach&& detach) {
  if (drain(poller, timeout_ms, idle)) {
    delete comm;
    return true;
  }
  detach();
  keeper.adopt(std::unique_ptr<Comm>(comm));
  return false;
}

}  // namespace weft
