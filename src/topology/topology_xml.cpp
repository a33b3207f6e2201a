#include "topology/topology_xml.h"

#include <sys/utsname.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>
#include <utility>

#include "core/sysfs.h"
#include "topology/instance_shapes.h"
#include "topology/pci_relation.h"
#include "topology/pci_tree.h"

namespace weft {
namespace {

// NCCL's parser: at most 16 attributes and 255 characters a value, 256
// nodes in all (NCCL adds its own GPU and NVLink nodes to those).
constexpr size_t kMaxAttributes = 16;
constexpr size_t kMaxValue = 254;
constexpr int kMaxNodes = 200;

struct Element {
  std::string tag;
  std::vector<std::pair<std::string, std::string>> attributes;
  std::vector<Element> children;

  const std::string* attribute(const std::string& key) const {
    for (const auto& [k, v] : attributes) {
      if (k == key) return &v;
    }
    return nullptr;
  }
};

std::string hex(uint32_t value, int digits) {
  char text[16];
  std::snprintf(text, sizeof(text), "0x%0*x", digits, value);
  return text;
}

std::string hex64(uint64_t value) {
  char text[24];
  std::snprintf(text, sizeof(text), "0x%llx", static_cast<unsigned long long>(value));
  return text;
}

// A quoted value NCCL reads back unchanged: no quote, no markup.
bool plain_value(const std::string& value) {
  return value.size() <= kMaxValue && value.find_first_of("\"'<>&\t") == std::string::npos;
}

int count_nodes(const Element& element) {
  int n = 1;
  for (const Element& child : element.children) n += count_nodes(child);
  return n;
}

std::string check(const Element& element) {
  if (element.attributes.size() > kMaxAttributes) {
    return "<" + element.tag + "> has more than 16 attributes";
  }
  for (const auto& [key, value] : element.attributes) {
    if (!plain_value(value)) {
      return "<" + element.tag + " " + key + "> holds a value NCCL cannot read back: '" + value +
             "'";
    }
  }
  for (const Element& child : element.children) {
    std::string error = check(child);
    if (!error.empty()) return error;
  }
  return {};
}

// Two spaces a level: NCCL's parser takes spaces and newlines between
// elements, not tabs.
void render(const Element& element, int depth, std::string& out) {
  out.append(static_cast<size_t>(depth) * 2, ' ');
  out += "<" + element.tag;
  for (const auto& [key, value] : element.attributes) out += " " + key + "=\"" + value + "\"";
  if (element.children.empty()) {
    out += "/>\n";
    return;
  }
  out += ">\n";
  for (const Element& child : element.children) render(child, depth + 1, out);
  out.append(static_cast<size_t>(depth) * 2, ' ');
  out += "</" + element.tag + ">\n";
}

// NUMA nodes the kernel lists (devices/system/node/nodeN).
int numa_node_count(const std::string& sysfs_root) {
  int count = 0;
  while (!sysfs::read_line(sysfs_root + "/devices/system/node/node" + std::to_string(count) +
                           "/cpumap")
              .empty()) {
    ++count;
  }
  return count;
}

class Builder {
 public:
  Builder(const TopologyRequest& request, const PciTree& tree)
      : request_(request), tree_(tree), system_{"system", {{"version", "1"}}, {}} {}

  // The CPU (NUMA node) element, made on first use; numaid -1 when the
  // kernel does not know the node.
  Element& cpu(int numa) {
    for (Element& child : system_.children) {
      if (*child.attribute("numaid") == std::to_string(numa)) return child;
    }
    Element cpu{"cpu", {{"numaid", std::to_string(numa)}}, {}};
    // Unknown node (-1) on a one-node machine: that node's CPUs.
    const int node = numa < 0 && numa_node_count(request_.sysfs_root) == 1 ? 0 : numa;
    const std::string affinity =
        node >= 0 ? sysfs::read_line(request_.sysfs_root + "/devices/system/node/node" +
                                     std::to_string(node) + "/cpumap")
                  : "";
    if (!affinity.empty()) cpu.attributes.emplace_back("affinity", affinity);
    const CpuIdentity& id = request_.cpu;
    if (!id.arch.empty()) cpu.attributes.emplace_back("arch", id.arch);
    if (!id.vendor.empty()) cpu.attributes.emplace_back("vendor", id.vendor);
    if (id.family >= 0) cpu.attributes.emplace_back("familyid", std::to_string(id.family));
    if (id.model >= 0) cpu.attributes.emplace_back("modelid", std::to_string(id.model));
    auto at = std::find_if(system_.children.begin(), system_.children.end(), [&](const Element& e) {
      return std::stoi(*e.attribute("numaid")) > numa;
    });
    return *system_.children.insert(at, std::move(cpu));
  }

  // The first CPU, where NCCL puts a NIC that is no PCI device.
  Element& first_cpu() { return system_.children.empty() ? cpu(0) : system_.children.front(); }

  // The pci child of `parent` with this bus id, made with `attributes` on
  // first use; children stay in bus id order, as NCCL keeps them.
  static Element& pci(Element& parent, const std::string& bus_id,
                      std::vector<std::pair<std::string, std::string>> attributes) {
    for (Element& child : parent.children) {
      const std::string* id = child.attribute("busid");
      if (child.tag == "pci" && id != nullptr && *id == bus_id) return child;
    }
    auto at = std::find_if(parent.children.begin(), parent.children.end(), [&](const Element& e) {
      const std::string* id = e.attribute("busid");
      return e.tag == "pci" && id != nullptr && *id > bus_id;
    });
    attributes.insert(attributes.begin(), {"busid", bus_id});
    return *parent.children.insert(at, Element{"pci", std::move(attributes), {}});
  }

  // A real function's attributes; the link from `fallback_*` where sysfs
  // has none (NCCL itself would then assume 8 GT/s x16).
  static std::vector<std::pair<std::string, std::string>> function_attributes(
      const PciFunction& f, const std::string& fallback_speed, int fallback_width) {
    const std::string speed = f.link_speed.empty() ? fallback_speed : f.link_speed;
    const int width = f.link_width > 0 ? f.link_width : fallback_width;
    return {{"class", hex(f.class_code, 6)},
            {"vendor", hex(f.vendor, 4)},
            {"device", hex(f.device, 4)},
            {"subsystem_vendor", hex(f.subsystem_vendor, 4)},
            {"subsystem_device", hex(f.subsystem_device, 4)},
            {"link_speed", speed},
            {"link_width", std::to_string(width)}};
  }

  // The function where sysfs puts it: under the CPU of its root port's
  // NUMA node, below each bridge above it.
  Element& place(const PciFunction& f) {
    const PciFunction* top = f.bridges.empty() ? &f : tree_.find(f.bridges.front());
    int numa = top != nullptr ? top->numa_node : -1;
    if (numa < 0) numa = f.numa_node;
    Element* parent = &cpu(numa);
    for (const std::string& bridge : f.bridges) {
      const PciFunction* b = tree_.find(bridge);
      parent = b != nullptr
                   ? &pci(*parent, bridge, function_attributes(*b, "", 0))
                   : &pci(*parent, bridge,
                          {{"class", "0x060400"}, {"link_speed", ""}, {"link_width", "0"}});
    }
    return pci(*parent, f.bus_id, function_attributes(f, "", 0));
  }

  static void add_net(Element& parent, const TopologyNet& net) {
    Element* nic = nullptr;
    for (Element& child : parent.children) {
      if (child.tag == "nic") nic = &child;
    }
    if (nic == nullptr) {
      parent.children.push_back(Element{"nic", {}, {}});
      nic = &parent.children.back();
    }
    Element e{"net",
              {{"name", net.name},
               {"dev", std::to_string(net.dev)},
               {"speed", std::to_string(net.speed_mbps)},
               {"port", std::to_string(net.port)},
               {"guid", hex64(net.guid)},
               {"maxconn", std::to_string(net.max_comms)}},
              {}};
    if (net.rail_id >= 0) e.attributes.emplace_back("rail", std::to_string(net.rail_id));
    if (net.plane_id >= 0) e.attributes.emplace_back("plane", std::to_string(net.plane_id));
    nic->children.push_back(std::move(e));
  }

  Element& system() { return system_; }

 private:
  const TopologyRequest& request_;
  const PciTree& tree_;
  Element system_;
};

}  // namespace

CpuIdentity read_cpu_identity(const std::string& cpuinfo_path) {
  CpuIdentity id;
  utsname name{};
  if (uname(&name) == 0) {
    const std::string machine = name.machine;
    id.arch = machine == "aarch64" ? "arm64" : machine.rfind("ppc64", 0) == 0 ? "ppc64" : machine;
  }
  std::ifstream in(cpuinfo_path);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) break;  // the first processor is enough
    const auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string key = line.substr(0, colon);
    while (!key.empty() && (key.back() == ' ' || key.back() == '\t')) key.pop_back();
    const std::string value = colon + 2 <= line.size() ? line.substr(colon + 2) : "";
    if (key == "vendor_id") id.vendor = value;
    if (key == "cpu family") id.family = std::atoi(value.c_str());
    if (key == "model") id.model = std::atoi(value.c_str());
  }
  if (id.arch != "x86_64") id.vendor.clear();  // NCCL reads the vendor on x86 only
  return id;
}

Topology build_topology(const TopologyRequest& request) {
  Topology topology;
  const PciTree tree = PciTree::read(request.sysfs_root);
  const std::vector<const PciFunction*> gpus = tree.nvidia_gpus();
  // weft's NIC functions, in bus id order, and the nets on each.
  std::map<std::string, std::vector<const TopologyNet*>> nets_of;
  std::vector<const TopologyNet*> loose;  // not PCI devices (or not in this tree)
  for (const TopologyNet& net : request.nets) {
    const PciFunction* f = net.pci_path.empty() ? nullptr : tree.find_path(net.pci_path);
    if (f == nullptr) {
      loose.push_back(&net);
      if (!net.pci_path.empty()) {
        topology.notes.push_back(net.name + ": " + net.pci_path +
                                 " is not a PCI function in this tree; placed on the first CPU");
      }
    } else {
      nets_of[f->bus_id].push_back(&net);
    }
  }
  std::vector<const PciFunction*> nics;
  for (const auto& [bus_id, nets] : nets_of) nics.push_back(tree.find(bus_id));
  topology.gpus = static_cast<int>(gpus.size());
  topology.nics = static_cast<int>(nics.size());

  bool shared = false;
  for (const PciFunction* gpu : gpus) {
    for (const PciFunction* nic : nics)
      shared = shared || pci_relation(gpu->path, nic->path).same_root;
  }
  topology.sysfs_pairs = shared || gpus.empty() || nics.empty();

  const InstanceShape* shape = nullptr;
  const DmiIdentity dmi = read_dmi(request.sysfs_root);
  if (request.shape != "auto" && request.shape != "sysfs") {
    shape = find_instance_shape(request.shape);
    std::string why;
    if (shape == nullptr) {
      std::string names;
      for (const InstanceShape& s : instance_shapes()) names += std::string(" ") + s.name;
      topology.error = "unknown shape '" + request.shape + "' (known:" + names + ", auto, sysfs)";
      return topology;
    }
    if (!shape_matches(*shape, dmi, gpus, nics, &why)) {
      topology.error = "this node is not " + request.shape + ": " + why;
      return topology;
    }
  } else if (request.shape == "auto" && !topology.sysfs_pairs) {
    for (const InstanceShape& s : instance_shapes()) {
      if (shape_matches(s, dmi, gpus, nics, nullptr)) shape = &s;
    }
    if (shape == nullptr) {
      topology.notes.push_back(
          "no GPU shares a host bridge with a NIC and no row of the instance table matches "
          "(weft-info --topo --shape NAME says why a row does not): the file follows sysfs, and "
          "NCCL will see every GPU-NIC pair as crossing the CPU");
    }
  }

  Builder builder(request, tree);
  if (shape != nullptr) {
    topology.shape = shape->name;
    const int groups = shape->gpus / shape->gpus_per_switch;
    const int numa_nodes = numa_node_count(request.sysfs_root);
    for (int g = 0; g < groups; ++g) {
      const PciFunction* first = gpus[static_cast<size_t>(g * shape->gpus_per_switch)];
      int numa = first->numa_node;
      if (numa < 0 && numa_nodes > 0) {
        numa = g * numa_nodes / groups;
        topology.notes.push_back("GPU " + first->bus_id + " has no NUMA node in sysfs: switch " +
                                 std::to_string(g) + " placed on node " + std::to_string(numa) +
                                 " by order");
      }
      char bus_id[32];
      std::snprintf(bus_id, sizeof(bus_id), "ffff:ff:%02x.0", g + 1);
      Element& bridge = Builder::pci(builder.cpu(numa), bus_id,
                                     {{"class", "0x060400"},
                                      {"vendor", "0xffff"},
                                      {"device", "0xffff"},
                                      {"subsystem_vendor", "0xffff"},
                                      {"subsystem_device", "0xffff"},
                                      {"link_speed", shape->link_speed},
                                      {"link_width", std::to_string(shape->link_width)}});
      std::string members;
      for (int i = 0; i < shape->gpus_per_switch; ++i) {
        const PciFunction* gpu = gpus[static_cast<size_t>(g * shape->gpus_per_switch + i)];
        Builder::pci(bridge, gpu->bus_id,
                     Builder::function_attributes(*gpu, shape->link_speed, shape->link_width));
        members += " GPU " + gpu->bus_id;
      }
      for (int i = 0; i < shape->nics_per_switch; ++i) {
        const PciFunction* nic = nics[static_cast<size_t>(g * shape->nics_per_switch + i)];
        Element& e =
            Builder::pci(bridge, nic->bus_id,
                         Builder::function_attributes(*nic, shape->link_speed, shape->link_width));
        for (const TopologyNet* net : nets_of[nic->bus_id]) Builder::add_net(e, *net);
        members += " NIC " + nic->bus_id;
      }
      topology.notes.push_back(std::string("switch ") + bus_id + " (NUMA node " +
                               std::to_string(numa) + "):" + members);
    }
  } else {
    for (const PciFunction* gpu : gpus) builder.place(*gpu);
    for (const PciFunction* nic : nics) {
      Element& e = builder.place(*nic);
      for (const TopologyNet* net : nets_of[nic->bus_id]) Builder::add_net(e, *net);
    }
  }
  for (const TopologyNet* net : loose) Builder::add_net(builder.first_cpu(), *net);
  if (builder.system().children.empty()) builder.cpu(0);  // NCCL wants one CPU at least
  builder.system().attributes.emplace_back("name", "weft " + topology.source());

  topology.error = check(builder.system());
  if (topology.error.empty() && count_nodes(builder.system()) > kMaxNodes) {
    topology.error = "the topology has " + std::to_string(count_nodes(builder.system())) +
                     " elements; NCCL reads 256 with its own additions";
  }
  if (!topology.error.empty()) return topology;
  topology.xml = "<!-- NCCL topology written by weft-info (" + topology.source() + ") -->\n";
  render(builder.system(), 0, topology.xml);
  return topology;
}

}  // namespace weft
