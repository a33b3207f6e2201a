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

// What kind of device the library presents. The libibverbs personality alone
// makes RoCE/InfiniBand devices; the EFA personality switches the library it
// is linked into to EFA devices (set_device_flavour, before the first scan).
enum class Flavour { kRc, kEfa };
void set_device_flavour(Flavour flavour);
Flavour device_flavour();

// EFA device attributes (efadv_query_device), from SOFTEFA_* at scan time.
struct EfaCaps {
  bool rdma_read = true;
  bool rdma_write = true;
  bool unsolicited_write_recv = true;
  bool rnr_retry = true;
  bool cq_with_sgid = true;
  bool in_order_128 = false;  // 128-byte aligned in-order RDMA (ibv_query_qp_data_in_order)
  uint32_t max_sq_wr = 4096;
  uint32_t max_rq_wr = 8192;
  uint16_t max_sq_sge = 2;
  uint16_t max_rq_sge = 3;
  uint16_t inline_buf_size = 32;
  uint32_t max_rdma_size = 1u << 30;
  uint32_t rnr_backoff_us = 100;  // between an RNR NAK and the retransmission
};

struct DeviceInfo {
  std::string name;
  bool efa = false;
  uint32_t vendor_id = 0x1de5;
  uint32_t vendor_part_id = 0x5f7e;
  uint32_t max_msg = 1u << 31;  // ibv_port_attr.max_msg_sz (EFA: the MTU)
  EfaCaps efa_caps;
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
