// Which NICs form one NCCL device. NCCL's own NIC fusion merges the ports
// of one card (makeVDevice); weft does the same by PCI locality before NCCL
// sees the devices, so a dual-port NIC appears as one device twice as fast.
// Transport-neutral, but only the libfabric transport groups its NICs so
// far; the verbs transport reports each port as a device of its own
// (docs/verbs-transport.md).
#pragma once

#include <string>
#include <vector>

namespace weft {

enum class RailGrouping {
  Off,  // every NIC is a device
  Pci,  // functions of one PCI device (ports of one card) form a device
  All,  // every NIC of one fabric forms a device (software rails, tests)
};

struct RailCandidate {
  std::string fabric;    // only NICs of the same fabric (provider) group
  std::string pci_path;  // /sys/devices/... path; empty: not a PCI device
};

// Groups of candidate indices, in order of their first member; each group
// holds at most `max_rails` NICs (larger sets are split in order).
std::vector<std::vector<int>> group_rails(const std::vector<RailCandidate>& candidates,
                                          RailGrouping grouping, int max_rails);

// The PCI device of a function's path: "/sys/devices/pci0000:00/0000:3b:00.1"
// -> "/sys/devices/pci0000:00/0000:3b:00"; empty when the path names no
// PCI function.
std::string pci_device_of(const std::string& pci_path);

}  // namespace weft
