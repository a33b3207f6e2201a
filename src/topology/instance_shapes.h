// Cloud instance shapes whose PCI tree the VM hides: every GPU and NIC sits
// on a host bridge of its own (Hyper-V's virtual PCI, for one), so sysfs
// cannot say which NIC is beside which GPU and NCCL pairs them blindly.
// Each row says how to recognise the shape and how its GPUs and NICs are
// really grouped; docs/topology.md documents the table and its sources.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "topology/pci_tree.h"

namespace weft {

struct InstanceShape {
  const char* name;                   // "azure-ndv4", what --shape takes
  const char* instances;              // the instance types it covers
  const char* sys_vendor;             // DMI sys_vendor
  const char* product_prefix;         // DMI product_name prefix, "" when DMI does not name it
  std::vector<uint32_t> gpu_devices;  // NVIDIA device ids
  uint32_t nic_vendor;
  std::vector<uint32_t> nic_devices;  // empty: any network function of nic_vendor
  int gpus;
  // Each PCIe switch of the board: this many GPUs and NICs, in bus id order.
  int gpus_per_switch;
  int nics_per_switch;
  const char* link_speed;  // the links, where the VM reports none
  int link_width;
};

const std::vector<InstanceShape>& instance_shapes();
const InstanceShape* find_instance_shape(std::string_view name);

// The node's DMI identity (sysfs class/dmi/id).
struct DmiIdentity {
  std::string sys_vendor;
  std::string product_name;
};
DmiIdentity read_dmi(const std::string& sysfs_root);

// Whether `shape` describes a node with this identity, these GPUs and these
// NIC functions; `why` says what did not match.
bool shape_matches(const InstanceShape& shape, const DmiIdentity& dmi,
                   const std::vector<const PciFunction*>& gpus,
                   const std::vector<const PciFunction*>& nics, std::string* why);

}  // namespace weft
