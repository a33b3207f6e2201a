// Network events for NCCL's profiler (net ABI v10+). NCCL hands init a
// callback and every isend/irecv a parent handle (its proxy step); weft
// starts one event per message when it posts one and stops it when test()
// reports the request done; under a send's event, one per queue pair's or
// rail's share of it, stopped when that share completes. Off
// (WEFT_NET_PROFILER), nothing is called and a request costs one pointer
// test in test() and one flag test per share posted. docs/profiler.md.
#pragma once

#include <atomic>
#include <cstddef>
#include <string>

#include "weft/transport.h"

namespace weft {

// init (v10+): NCCL's callback, kept for the process (NCCL passes the
// same one to every init). `mode`: the WEFT_NET_PROFILER value.
void set_net_profiler(ncclProfilerCallback_t callback, const std::string& mode);
namespace detail {
extern std::atomic<bool> g_net_profiler_on;
}
// Inline: transports ask it for every send they post.
inline bool net_profiler_on() {
  return detail::g_net_profiler_on.load(std::memory_order_relaxed);
}

// After a successful isend / irecv that returned `request`: one event per
// message whose parent handle is not NULL (NCCL's bootstrap passes NULL).
void start_send_event(Request& request, const Comm& comm, void* parent, size_t size);
void start_recv_events(Request& request, const Comm& comm, int n, void* const* parents,
                       const size_t* sizes);
void stop_net_events_slow(NetEventHandles& events);
// When test() reports the request done or failed (its shares are then
// forgotten).
inline void stop_net_events(Request& request) {
  if (request.net_events && (request.net_events->count > 0 || request.net_events->share_count > 0))
    stop_net_events_slow(*request.net_events);
}

// Transports, as a send is posted (only while net_profiler_on()): forget
// the shares of the request's last use, then record each share; the send's
// event starts them once isend returns. The index goes to share_done.
void begin_shares(Request& request);
int record_share(Request& request, uint32_t lane, size_t length);
// The share completed: its event stops now (or never starts).
void share_done_slow(NetEventHandles& events, int index);
inline void share_done(Request& request, int index) {
  if (index >= 0 && request.net_events) share_done_slow(*request.net_events, index);
}
// Every share that went out on `lane` completed (a verbs completion names
// its queue pair).
void share_done_on_lane(Request& request, uint32_t lane);

}  // namespace weft
