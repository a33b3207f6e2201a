// An open device: its async events, the state of its ports and the knobs
// read when it was opened.
#pragma once

#include <infiniband/verbs.h>

#include <atomic>
#include <deque>
#include <memory>
#include <mutex>

#include "device.h"
#include "handle.h"

namespace softverbs {

class Nic;

class Context {
 public:
  Handle<verbs_context, Context> handle{};
  Device* device = nullptr;
  Nic* nic = nullptr;
  int async_fd = -1;
  int reorder_window = 0;
  uint64_t reorder_seed = 1;
  std::unique_ptr<std::atomic<bool>[]> port_down;

  std::mutex mu;
  bool closed = false;
  std::deque<ibv_async_event> events;

  Context() = default;
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;
  ~Context();

  ibv_context* verbs() { return &handle.verbs.context; }
  const DeviceInfo& info() const { return device->info; }
  void queue_event(const ibv_async_event& event);
  bool is_port_down(int port) const;
};

Context* context_of(ibv_context* context);

}  // namespace softverbs
