#include "topology/pci_relation.h"

#include <cstdio>
#include <vector>

#include "core/string_split.h"

namespace weft {
std::vector<std::string> pci_chain(const std::string& path) {
  const auto devices = path.find("/devices/pci");
  if (devices == std::string::npos) return {};
  std::vector<std::string> chain = split(path.substr(devices + 9), '/');
  // Only PCI functions (dddd:bb:dd.f) below the host bridge: a path into a
  // function's own files (.../0000:3b:00.0/net/eth0) ends at the function.
  size_t keep = 1;
  while (keep < chain.size() && chain[keep].size() == 12 && chain[keep][4] == ':' &&
         chain[keep][7] == ':' && chain[keep][10] == '.') {
    ++keep;
  }
  chain.resize(keep);
  return chain.size() >= 2 ? chain : std::vector<std::string>{};
}

PciRelation pci_relation(const std::string& a, const std::string& b) {
  PciRelation relation;
  const std::vector<std::string> x = pci_chain(a);
  const std::vector<std::string> y = pci_chain(b);
  if (x.empty() || y.empty()) return relation;
  relation.pci = true;
  relation.same_root = x[0] == y[0];
  if (!relation.same_root) return relation;
  // Bridges are the entries between the host bridge and the device.
  const size_t bridges_x = x.size() - 2;
  const size_t bridges_y = y.size() - 2;
  size_t shared = 0;
  while (shared < bridges_x && shared < bridges_y && x[shared + 1] == y[shared + 1]) ++shared;
  relation.shared_bridges = static_cast<int>(shared);
  relation.hops = static_cast<int>(bridges_x - shared + bridges_y - shared);
  return relation;
}

std::string PciRelation::describe() const {
  if (!pci) return "not PCI devices";
  if (!same_root) return "different host bridges";
  char text[96];
  if (shared_bridges > 0 && hops == 0) return "under the same PCI bridge";
  if (shared_bridges > 0) {
    std::snprintf(text, sizeof(text), "%d hop%s below a shared PCI bridge", hops,
                  hops == 1 ? "" : "s");
  } else {
    std::snprintf(text, sizeof(text), "same host bridge, %d hop%s", hops, hops == 1 ? "" : "s");
  }
  return text;
}

bool PciRelation::nearer_than(const PciRelation& other) const {
  if (pci != other.pci) return pci;
  if (same_root != other.same_root) return same_root;
  if (shared_bridges != other.shared_bridges) return shared_bridges > other.shared_bridges;
  return hops < other.hops;
}

}  // namespace weft
