#include "abi/plugin_state.h"

#include <mutex>
#include <string>

#include "abi/transport_table.h"
#include "core/net_events.h"
#include "topology/topology_offer.h"
#include "weft/log.h"

namespace weft::abi {
namespace {

struct PluginState {
  std::mutex mutex;
  int references = 0;
  std::shared_ptr<Transport> transport;
};

PluginState& state() {
  static PluginState* instance = new PluginState();  // never destroyed: outlives static dtors
  return *instance;
}

ncclDebugLogLevel level_from_name(const std::string& name) {
  if (name == "NONE") return NCCL_LOG_NONE;
  if (name == "INFO") return NCCL_LOG_INFO;
  if (name == "TRACE") return NCCL_LOG_TRACE;
  return NCCL_LOG_WARN;
}

}  // namespace

ncclResult_t acquire_plugin(ncclDebugLogger_t logger, ncclProfilerCallback_t profiler) {
  PluginState& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (logger != nullptr) set_logger(logger);
  if (s.references > 0) {
    ++s.references;
    return ncclSuccess;
  }
  Params params;
  std::string error;
  if (!load_params(params, error)) {
    WEFT_WARN("%s", error.c_str());
    return ncclInvalidArgument;
  }
  set_stderr_level(level_from_name(params.debug));
  set_net_profiler(profiler, params.net_profiler);
  std::unique_ptr<Transport> transport;
  ncclResult_t result = make_transport(params, &transport);
  if (result != ncclSuccess) return result;
  s.transport = std::move(transport);
  s.references = 1;
  WEFT_INFO(NCCL_INIT, "initialized %s transport with %d device(s)", s.transport->name(),
            s.transport->device_count());
  std::vector<DeviceProperties> devices(static_cast<size_t>(s.transport->device_count()));
  for (size_t d = 0; d < devices.size(); ++d) {
    if (s.transport->properties(static_cast<int>(d), &devices[d]) != ncclSuccess)
      return ncclSuccess;
  }
  offer_nccl_topology(params, devices);
  return ncclSuccess;
}

void release_plugin() {
  PluginState& s = state();
  std::shared_ptr<Transport> closing;
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    if (s.references == 0) return;
    if (--s.references > 0) return;
    closing = std::move(s.transport);
  }
  closing.reset();  // outside the lock: closing may wait for in-flight operations
}

std::shared_ptr<Transport> transport_or_null(const char* caller) {
  PluginState& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (!s.transport) {
    WEFT_WARN("%s called before a successful init", caller);
    return nullptr;
  }
  return s.transport;
}

}  // namespace weft::abi
