// An open device: its async events and the state of its ports.

#include "context.h"

#include <unistd.h>

#include <cstddef>

namespace softverbs {

Context::~Context() {
  if (!closed && async_fd >= 0) close(async_fd);
}

void Context::queue_event(const ibv_async_event& event) {
  std::lock_guard<std::mutex> lock(mu);
  if (closed) return;
  events.push_back(event);
  uint64_t one = 1;
  ssize_t w = write(async_fd, &one, sizeof(one));
  (void)w;
}

bool Context::is_port_down(int port) const {
  if (port < 1 || static_cast<size_t>(port) > info().ports.size()) return true;
  return port_down[port - 1].load();
}

Context* context_of(ibv_context* context) {
  if (context == nullptr) return nullptr;
  auto* vctx = reinterpret_cast<verbs_context*>(reinterpret_cast<char*>(context) -
                                                offsetof(verbs_context, context));
  return owner_of<Context>(vctx);
}

}  // namespace softverbs
