// The PCI functions NCCL's topology is built from, as sysfs describes them:
// each function's ids and class, its link, its NUMA node and the bridges
// above it. Read from a sysfs root (/sys, or a recorded tree of another
// node) so that topologies of node shapes can be produced and tested here.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace weft {

struct PciFunction {
  std::string bus_id;                // "0000:3b:00.0"
  std::string path;                  // its sysfs device path, symlinks resolved
  std::vector<std::string> bridges;  // bus ids of the bridges above it, top first
  uint32_t class_code = 0;           // 0x030200
  uint32_t vendor = 0;
  uint32_t device = 0;
  uint32_t subsystem_vendor = 0;
  uint32_t subsystem_device = 0;
  // The link as NCCL rates it: the lower of this function's and its
  // upstream port's maximum ("16.0 GT/s PCIe", 16); empty/0 when sysfs has
  // none (many VMs).
  std::string link_speed;
  int link_width = 0;
  int numa_node = -1;

  bool is_nvidia_gpu() const;  // NVIDIA, display or 3D controller
};

// PCI link speed in GT/s ("16.0 GT/s PCIe" -> 16), 0 when unreadable.
double pci_speed_gts(const std::string& text);

class PciTree {
 public:
  // Every function under `sysfs_root`/bus/pci/devices. A root without one
  // gives an empty tree.
  static PciTree read(const std::string& sysfs_root);

  const PciFunction* find(const std::string& bus_id) const;
  // The function a sysfs device path (a NIC's pciPath) names, by its bus id.
  const PciFunction* find_path(const std::string& path) const;
  // NVIDIA GPUs, in bus id order.
  std::vector<const PciFunction*> nvidia_gpus() const;

 private:
  std::vector<PciFunction> functions_;  // in bus id order
};

}  // namespace weft
