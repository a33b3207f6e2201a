// Network events for NCCL's profiler (net ABI v10+). NCCL hands init a
// callback and every isend/irecv a parent handle (its proxy step); weft
// starts one event per message when it posts one and stops it when test()
// reports the request done. Off (WEFT_NET_PROFILER), nothing is called and
// a request costs one pointer test in test(). docs/profiler.md.
#pragma once

#include <cstddef>
#include <string>

#include "weft/transport.h"

namespace weft::abi {

// init (v10+): NCCL's callback, kept for the process (NCCL passes the
// same one to every init). `mode`: the WEFT_NET_PROFILER value.
void set_net_profiler(ncclProfilerCallback_t callback, const std::string& mode);
bool net_profiler_on();

// After a successful isend / irecv that returned `request`: one event per
// message whose parent handle is not NULL (NCCL's bootstrap passes NULL).
void start_send_event(Request& request, const Comm& comm, void* parent, size_t size);
void start_recv_events(Request& request, const Comm& comm, int n, void* const* parents,
                       const size_t* sizes);
void stop_net_events_slow(NetEventHandles& events);
// When test() reports the request done or failed.
inline void stop_net_events(Request& request) {
  if (request.net_events && request.net_events->count > 0)
    stop_net_events_slow(*request.net_events);
}

}  // namespace weft::abi
