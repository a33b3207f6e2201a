#include "topology/topology_offer.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdlib>

#include "topology/topology_xml.h"
#include "weft/log.h"

namespace weft {

std::string offer_nccl_topology(const Params& params,
                                const std::vector<DeviceProperties>& devices) {
  if (params.topo_file == "off") return {};
  const char* set = std::getenv("NCCL_TOPO_FILE");
  if (set != nullptr && set[0] != '\0') return {};  // the user's file wins
  TopologyRequest request;
  request.sysfs_root = params.sysfs_root;
  request.cpu = read_cpu_identity("/proc/cpuinfo");
  for (size_t d = 0; d < devices.size(); ++d) {
    const DeviceProperties& p = devices[d];
    request.nets.push_back({p.name, p.pci_path, static_cast<int>(d), p.speed_mbps, p.port, p.guid,
                            p.max_comms, p.rail_id, p.plane_id});
  }
  const Topology topology = build_topology(request);
  // No table row applies: NCCL reads the same tree itself, and nothing is
  // worth a log line (a tree too large to write does not matter then).
  if (topology.shape.empty()) return {};
  if (!topology.error.empty()) {
    WEFT_INFO(NCCL_INIT, "no NCCL topology file: %s", topology.error.c_str());
    return {};
  }
  // Kept open for the life of the process: NCCL reads the file at every
  // communicator's init.
  const int fd = memfd_create("weft-nccl-topology", MFD_CLOEXEC);
  if (fd < 0) {
    WEFT_INFO(NCCL_INIT, "no NCCL topology file: memfd_create failed");
    return {};
  }
  size_t done = 0;
  while (done < topology.xml.size()) {
    const ssize_t n = write(fd, topology.xml.data() + done, topology.xml.size() - done);
    if (n <= 0) {
      close(fd);
      WEFT_INFO(NCCL_INIT, "no NCCL topology file: writing the memory file failed");
      return {};
    }
    done += static_cast<size_t>(n);
  }
  const std::string path = "/proc/self/fd/" + std::to_string(fd);
  setenv("NCCL_TOPO_FILE", path.c_str(), 0);
  WEFT_INFO(NCCL_INIT,
            "NCCL_TOPO_FILE=%s: the %s layout of %d GPUs and %d NICs, which this VM's PCI tree "
            "hides (docs/topology.md; WEFT_TOPO_FILE=off leaves NCCL to sysfs)",
            path.c_str(), topology.source().c_str(), topology.gpus, topology.nics);
  return path;
}

}  // namespace weft
