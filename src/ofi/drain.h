// Bounded progress loop used when closing comms.
#pragma once

#include <chrono>
#include <thread>

#include "ofi/endpoint.h"

namespace weft::ofi {

template <typename Idle>
bool drain(Endpoint& endpoint, int timeout_ms, Idle&& idle) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (!idle()) {
    if (endpoint.poll() != ncclSuccess) return false;
    if (std::chrono::steady_clock::now() >= deadline) return idle();
    std::this_thread::yield();
  }
  return true;
}

}  // namespace weft::ofi
