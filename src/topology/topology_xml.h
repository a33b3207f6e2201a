// An NCCL topology file (NCCL_TOPO_FILE) for this node: the CPUs, the PCI
// bridges above each GPU and each of weft's NICs, and weft's devices as
// NCCL names them. From sysfs where the PCI tree is real; from the instance
// table (instance_shapes.h) where the VM hides it and NCCL would otherwise
// pair GPUs with NICs blindly. Written in the subset of XML NCCL's own
// parser reads (docs/topology.md).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace weft {

// One of weft's devices, as getProperties reports it.
struct TopologyNet {
  std::string name;
  std::string pci_path;  // empty: not a PCI device (tcp on a veth, shm)
  int dev = 0;
  int speed_mbps = 0;
  int port = 0;
  uint64_t guid = 0;
  int max_comms = 0;
  int rail_id = -1;  // v12; -1 undefined
  int plane_id = -1;
};

// The CPU attributes NCCL's topology needs (it reads them from cpuid when it
// builds the tree itself).
struct CpuIdentity {
  std::string arch;    // x86_64, arm64, ppc64
  std::string vendor;  // GenuineIntel, AuthenticAMD; x86 only
  int family = -1;
  int model = -1;
};
// From /proc/cpuinfo (or a recorded copy) and uname.
CpuIdentity read_cpu_identity(const std::string& cpuinfo_path);

struct TopologyRequest {
  std::string sysfs_root = "/sys";
  CpuIdentity cpu;
  std::vector<TopologyNet> nets;
  // "auto": the table where the tree hides the pairing and a row matches;
  // "sysfs": the tree as it is; or a row's name, which must match.
  std::string shape = "auto";
};

struct Topology {
  std::string error;  // not empty: no topology, and why
  std::string xml;
  std::string shape;  // the table row used; empty: the file follows sysfs
  // "sysfs" or "table azure-ndv4", for people.
  std::string source() const { return shape.empty() ? "sysfs" : "table " + shape; }
  // Some GPU shares a host bridge with one of weft's NICs, so NCCL can pair
  // them from sysfs by itself; false on a flat VM tree (and then the file is
  // what makes the pairing right).
  bool sysfs_pairs = true;
  int gpus = 0;
  int nics = 0;                    // PCI functions of weft's devices
  std::vector<std::string> notes;  // what was decided and why
};

Topology build_topology(const TopologyRequest& request);

}  // namespace weft
