// Process-wide plugin state: the transport, shared by every init. v11+
// init/finalize come per communicator, older versions once per process; a
// reference count decides when the transport is torn down.
#pragma once

#include <memory>

#include "weft/params.h"
#include "weft/transport.h"

namespace weft::abi {

// Per-communicator context handed to NCCL by v11+ init.
struct PluginContext {
  uint64_t comm_id = 0;
  CommConfig config;
  // setNetAttr's last hints (NCCL calls it from its proxy thread only).
  ConnectionHints hints;
  bool hints_seen = false;
  bool budget_warned = false;  // said once per communicator
};

// Takes a reference; opens the transport on the first one. `profiler`: the
// callback of v10+ init (nullptr before).
ncclResult_t acquire_plugin(ncclDebugLogger_t logger, ncclProfilerCallback_t profiler = nullptr);
// Drops a reference; closes the transport at the last one. Comms still open
// keep their own endpoints alive until they are closed.
void release_plugin();

// The transport, or nullptr (and a logged error) before init.
std::shared_ptr<Transport> transport_or_null(const char* caller);

}  // namespace weft::abi
