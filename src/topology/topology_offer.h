// At init, on a node whose VM hides which NIC is beside which GPU and whose
// shape the instance table knows, give NCCL the layout (WEFT_TOPO_FILE=auto):
// the topology file in a memory file, NCCL_TOPO_FILE pointing at it.
#pragma once

#include <string>
#include <vector>

#include "weft/params.h"
#include "weft/transport.h"

namespace weft {

// The NCCL_TOPO_FILE value set, or empty when nothing was done (the user set
// one, WEFT_TOPO_FILE=off, sysfs pairs the devices, no row matches).
std::string offer_nccl_topology(const Params& params, const std::vector<DeviceProperties>& devices);

}  // namespace weft
