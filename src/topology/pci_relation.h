// How two PCI devices sit relative to each other, from their sysfs paths
// (/sys/devices/pci0000:00/0000:00:02.0/0000:3b:00.0): under the same host
// bridge or not, how many bridges (PCIe switch ports, root ports) they
// share, and how many lie between them. What pairs a GPU with its nearest
// NIC; the same facts NCCL's topology reads from sysfs.
#pragma once

#include <string>
#include <vector>

namespace weft {

struct PciRelation {
  bool pci = false;        // both paths name PCI devices below a host bridge
  bool same_root = false;  // the same host bridge (pciDDDD:BB)
  int shared_bridges = 0;  // bridges above both devices, below the host bridge
  int hops = -1;           // bridges between them; -1 unless same_root
  // "under the same PCI bridge", "2 hops below a shared PCI bridge",
  // "same host bridge, 4 hops", "different host bridges", "not PCI devices".
  std::string describe() const;
  // Nearer than `other`: same root first, then more shared bridges, then
  // fewer hops.
  bool nearer_than(const PciRelation& other) const;
};

PciRelation pci_relation(const std::string& a, const std::string& b);

// The PCI chain of a sysfs device path: "pci0000:00", then the bridges'
// bus ids, then the device's; empty unless the path names a PCI function
// below a host bridge (a path into the function's own files ends at it).
std::vector<std::string> pci_chain(const std::string& path);

}  // namespace weft
