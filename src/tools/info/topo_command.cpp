// weft-info --topo: an NCCL topology file for this node (topology/topology_xml.h)
// from weft's devices as NCCL will see them (the plugin loaded as the node
// check loads it) and the PCI tree in sysfs or, where a VM hides it, the
// instance table.
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <ostream>

#include "commands.h"
#include "node_check.h"
#include "topology/instance_shapes.h"
#include "topology/topology_xml.h"

namespace weft::info {
namespace {

void print_shapes(std::ostream& out) {
  out << "shape        GPUs  per switch  vendor                 instances\n";
  for (const InstanceShape& s : instance_shapes()) {
    char line[256];
    std::snprintf(line, sizeof(line), "%-12s %4d  %d GPU %d NIC   %-22s %s\n", s.name, s.gpus,
                  s.gpus_per_switch, s.nics_per_switch, s.sys_vendor, s.instances);
    out << line;
  }
}

// Written beside, then renamed: a job reading the file never sees half.
bool write_file(const std::string& path, const std::string& text, std::ostream& err) {
  const std::string tmp = path + ".tmp." + std::to_string(getpid());
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << text;
    if (!out.flush()) {
      err << "weft-info --topo: cannot write " << tmp << "\n";
      std::remove(tmp.c_str());
      return false;
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    err << "weft-info --topo: cannot rename " << tmp << " to " << path << "\n";
    std::remove(tmp.c_str());
    return false;
  }
  return true;
}

}  // namespace

int run_topology(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  CheckOptions options;
  options.gpu = false;
  TopologyRequest request;
  std::string output;
  std::string cpuinfo = "/proc/cpuinfo";
  for (size_t i = 0; i < args.size(); ++i) {
    const bool has_value = i + 1 < args.size();
    if (args[i] == "--shape" && has_value) {
      request.shape = args[++i];
    } else if (args[i] == "-o" && has_value) {
      output = args[++i];
    } else if (args[i] == "--sysfs-root" && has_value) {
      request.sysfs_root = args[++i];
    } else if (args[i] == "--cpuinfo" && has_value) {
      cpuinfo = args[++i];
    } else if (args[i] == "--plugin" && has_value) {
      options.plugin = args[++i];
    } else {
      err << "weft-info --topo: unknown or incomplete option '" << args[i]
          << "' (accepted: -o FILE, --shape auto|sysfs|list|NAME, --sysfs-root DIR, --cpuinfo "
             "FILE, --plugin PATH)\n";
      return 2;
    }
  }
  if (request.shape == "list") {
    print_shapes(out);
    return 0;
  }
  const NodeReport report = check_node(options);
  if (report.devices.empty()) {
    err << "weft-info --topo: weft has no device here, so there is nothing to place; "
           "weft-info --check says why:\n";
    for (const Finding& f : report.findings) {
      if (f.severity == Severity::failure) err << "  " << f.text << "\n";
    }
    return 2;
  }
  request.cpu = read_cpu_identity(cpuinfo);
  for (size_t d = 0; d < report.devices.size(); ++d) {
    const NetDeviceInfo& device = report.devices[d];
    request.nets.push_back({device.name, device.pci_path, static_cast<int>(d), device.speed_mbps,
                            device.port, device.guid, device.max_comms, device.rail_id,
                            device.plane_id});
  }
  const Topology topology = build_topology(request);
  if (!topology.error.empty()) {
    err << "weft-info --topo: " << topology.error << "\n";
    return 2;
  }
  if (output.empty()) {
    out << topology.xml;
  } else if (!write_file(output, topology.xml, err)) {
    return 2;
  }
  err << "weft-info --topo: " << topology.gpus << " NVIDIA GPU(s), " << topology.nics
      << " NIC function(s), " << report.devices.size() << " weft device(s); placed from "
      << topology.source() << "\n";
  for (const std::string& note : topology.notes) err << "  " << note << "\n";
  if (!output.empty()) err << "use it with: export NCCL_TOPO_FILE=" << output << "\n";
  // A file that follows a tree where nothing pairs: written, but NCCL will
  // still pair blindly.
  return topology.sysfs_pairs || !topology.shape.empty() ? 0 : 1;
}

}  // namespace weft::info
