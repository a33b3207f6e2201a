// Finds the verbs ports weft may use: active IB or RoCE ports of
// InfiniBand-transport devices, filtered by WEFT_IB_HCA / NCCL_IB_HCA, each
// opened as a OpenPort with its GID chosen. EFA devices are counted, not used:
// EFA is served through libfabric.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "verbs/open_port.h"

namespace weft::verbs {

struct DiscoveredPorts {
  std::vector<std::shared_ptr<OpenPort>> ports;
  int efa_devices = 0;
  // Per device and port: used, or why not; for logs and weft-info.
  std::vector<std::string> notes;
};

// False (with the reason) only when the library cannot be loaded or the
// HCA list is malformed; no usable port is not an error here.
bool discover_ports(const Params& params, const cuda::Driver* cuda, DiscoveredPorts* out,
                    std::string* reason);

}  // namespace weft::verbs
