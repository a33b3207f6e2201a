// The devices the environment describes: their ports, GID tables and fake
// sysfs trees, and the limits every device has.
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>
#include <string>
#include <vector>

#include "handle.h"

namespace softverbs {

// What every device supports (ibv_query_device reports them).
constexpr uint32_t kMaxQpWr = 16384;
constexpr uint32_t kMaxSge = 32;
constexpr uint32_t kMaxInline = 256;
constexpr int kMaxCqe = 1 << 20;
constexpr uint64_t kMaxMessage = 1ULL << 31;

struct GidSlot {
  ibv_gid gid{};
  uint32_t type = IBV_GID_TYPE_IB;
  bool valid = false;
};

struct PortInfo {
  uint16_t lid = 0;
  std::vector<GidSlot> gids;  // the whole table (gid_tbl_len), some empty
};

struct DeviceInfo {
  std::string name;
  int index = 0;
  bool ib = false;
  uint64_t node_guid = 0;  // host order
  std::string netdev;
  unsigned ifindex = 0;
  uint8_t speed = 32;
  uint8_t width = 2;
  ibv_mtu mtu = IBV_MTU_1024;
  std::vector<PortInfo> ports;  // ports[p - 1]
  std::string pci_path;
};

struct Device {
  Handle<ibv_device, Device> handle{};
  DeviceInfo info;
};

// Builds the devices the environment describes now (owned by the library,
// alive until it unloads) and writes their fake sysfs trees.
std::vector<Device*> scan_devices();
// Removes this process's fake sysfs trees (at unload).
void remove_sysfs();
void write_port_state(const DeviceInfo& info, int port, bool up);

}  // namespace softverbs
