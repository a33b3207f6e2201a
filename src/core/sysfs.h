// What the kernel says about a NIC: its PCI device (for NCCL's topology)
// and link speed. Every function returns an empty/zero value when sysfs
// has no answer (virtual devices, containers without /sys).
#pragma once

#include <cstdint>
#include <string>

namespace weft::sysfs {

// The first line of a sysfs file without trailing blanks (DMI strings carry
// some), or empty when it cannot be read.
std::string read_line(const std::string& path);

// Resolved path of a file in /sys, or empty.
std::string realpath_of(const std::string& path);

// /sys/devices/... path of the PCI function domain:bus:device.function.
std::string pci_path(uint32_t domain, uint32_t bus, uint32_t device, uint32_t function);

// PCI device behind a network interface, or empty for lo, veth, bridges...
std::string netdev_pci_path(const std::string& netdev);

// Link speed of a network interface in Mbps; 0 when unknown (lo and veth
// report none, or -1).
int netdev_speed_mbps(const std::string& netdev);

}  // namespace weft::sysfs
