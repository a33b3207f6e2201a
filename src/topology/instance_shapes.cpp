#include "topology/instance_shapes.h"

#include <algorithm>
#include <cstdio>

#include "core/sysfs.h"

namespace weft {
namespace {

bool listed(const std::vector<uint32_t>& ids, uint32_t id) {
  return std::find(ids.begin(), ids.end(), id) != ids.end();
}

std::string hex(uint32_t value) {
  char text[16];
  std::snprintf(text, sizeof(text), "0x%04x", value);
  return text;
}

}  // namespace

// Device ids: A100 SXM4 40 GB 0x20b0, 80 GB 0x20b2; H100 SXM5 0x2330;
// H200 0x2335; Mellanox ConnectX-6 VF 0x101c, ConnectX-6 Dx/7 VF 0x101e;
// EFA (vendor 0x1d0f) any. docs/topology.md gives each row's source.
const std::vector<InstanceShape>& instance_shapes() {
  static const std::vector<InstanceShape> shapes = {
      {"azure-ndv4",
       "Standard_ND96asr_v4, Standard_ND96amsr_A100_v4",
       "Microsoft Corporation",
       "",
       {0x20b0, 0x20b2},
       0x15b3,
       {0x101c},
       8,
       2,
       2,
       "16.0 GT/s PCIe",
       16},
      {"azure-ndv5",
       "Standard_ND96isr_H100_v5, Standard_ND96isr_H200_v5",
       "Microsoft Corporation",
       "",
       {0x2330, 0x2335},
       0x15b3,
       {0x101e},
       8,
       2,
       2,
       "32.0 GT/s PCIe",
       16},
      {"aws-p4d",
       "p4d.24xlarge, p4de.24xlarge",
       "Amazon EC2",
       "p4d",
       {0x20b0, 0x20b2},
       0x1d0f,
       {},
       8,
       2,
       1,
       "16.0 GT/s PCIe",
       16},
      {"aws-p5",
       "p5.48xlarge, p5e.48xlarge",
       "Amazon EC2",
       "p5",
       {0x2330, 0x2335},
       0x1d0f,
       {},
       8,
       2,
       8,
       "32.0 GT/s PCIe",
       16},
  };
  return shapes;
}

const InstanceShape* find_instance_shape(std::string_view name) {
  for (const InstanceShape& shape : instance_shapes()) {
    if (name == shape.name) return &shape;
  }
  return nullptr;
}

DmiIdentity read_dmi(const std::string& sysfs_root) {
  return {sysfs::read_line(sysfs_root + "/class/dmi/id/sys_vendor"),
          sysfs::read_line(sysfs_root + "/class/dmi/id/product_name")};
}

bool shape_matches(const InstanceShape& shape, const DmiIdentity& dmi,
                   const std::vector<const PciFunction*>& gpus,
                   const std::vector<const PciFunction*>& nics, std::string* why) {
  auto fail = [&](std::string text) {
    if (why != nullptr) *why = std::move(text);
    return false;
  };
  if (dmi.sys_vendor != shape.sys_vendor) {
    return fail("DMI sys_vendor is '" + dmi.sys_vendor + "', not '" + shape.sys_vendor + "'");
  }
  if (dmi.product_name.rfind(shape.product_prefix, 0) != 0) {
    return fail("DMI product_name '" + dmi.product_name + "' does not start with '" +
                shape.product_prefix + "'");
  }
  if (static_cast<int>(gpus.size()) != shape.gpus) {
    return fail(std::to_string(gpus.size()) + " NVIDIA GPUs, not " + std::to_string(shape.gpus));
  }
  for (const PciFunction* gpu : gpus) {
    if (!listed(shape.gpu_devices, gpu->device)) {
      return fail("GPU " + gpu->bus_id + " is device " + hex(gpu->device));
    }
  }
  const size_t want_nics =
      static_cast<size_t>(shape.gpus / shape.gpus_per_switch * shape.nics_per_switch);
  if (nics.size() != want_nics) {
    return fail(std::to_string(nics.size()) + " NICs, not " + std::to_string(want_nics));
  }
  for (const PciFunction* nic : nics) {
    if (nic->vendor != shape.nic_vendor ||
        (!shape.nic_devices.empty() && !listed(shape.nic_devices, nic->device))) {
      return fail("NIC " + nic->bus_id + " is " + hex(nic->vendor) + ":" + hex(nic->device));
    }
  }
  return true;
}

}  // namespace weft
