// Ports and their address tables: ibv_query_port (exported and through
// verbs_context), GIDs and P_Keys.

#include "ibverbs/port_api.h"

#include <endian.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstring>

#include "ibverbs/api.h"
#include "model/context.h"
#include "model/device.h"

namespace softverbs {

int fill_port(Context* context, uint8_t port_num, ibv_port_attr* out, size_t len) {
  const DeviceInfo& info = context->info();
  if (port_num < 1 || port_num > info.ports.size()) return EINVAL;
  const PortInfo& port = info.ports[port_num - 1];
  bool down = context->is_port_down(port_num);
  ibv_port_attr a{};
  a.state = down ? IBV_PORT_DOWN : IBV_PORT_ACTIVE;
  a.max_mtu = IBV_MTU_4096;
  a.active_mtu = info.mtu;
  a.gid_tbl_len = static_cast<int>(port.gids.size());
  a.port_cap_flags = IBV_PORT_CM_SUP | IBV_PORT_DEVICE_MGMT_SUP | IBV_PORT_VENDOR_CLASS_SUP;
  a.max_msg_sz = 1u << 31;
  a.pkey_tbl_len = 1;
  a.lid = info.ib ? port.lid : 0;
  a.sm_lid = info.ib ? 1 : 0;
  a.max_vl_num = info.ib ? 4 : 1;
  a.subnet_timeout = 18;
  a.active_width = info.width;
  a.active_speed = info.speed;
  a.phys_state = down ? 3 : 5;  // Disabled : LinkUp
  a.link_layer = info.ib ? IBV_LINK_LAYER_INFINIBAND : IBV_LINK_LAYER_ETHERNET;
  a.flags = info.ib ? 0 : IBV_QPF_GRH_REQUIRED;
  a.max_msg_sz = info.max_msg;
  if (info.efa) {
    // EFA: no LID, no P_Key table to speak of, the MTU as max_msg_sz.
    a.link_layer = IBV_LINK_LAYER_UNSPECIFIED;
    a.port_cap_flags = 0;
    a.flags = 0;
    a.max_vl_num = 1;
  }
  std::memcpy(out, &a, std::min(len, sizeof(a)));
  return 0;
}

int query_port_ex(ibv_context* context, uint8_t port_num, ibv_port_attr* attr, size_t len) {
  return fill_port(context_of(context), port_num, attr, len);
}

}  // namespace softverbs

using namespace softverbs;

// The exported entry fills the pre-1.4 layout (up to port_cap_flags2), like
// rdma-core's; the inline ibv_query_port goes through verbs_context.
SOFTVERBS_API int(ibv_query_port)(ibv_context* verbs_ctx, uint8_t port_num,
                                  struct _compat_ibv_port_attr* attr) {
  return fill_port(context_of(verbs_ctx), port_num, reinterpret_cast<ibv_port_attr*>(attr),
                   offsetof(ibv_port_attr, port_cap_flags2));
}

SOFTVERBS_API int ibv_query_gid(ibv_context* verbs_ctx, uint8_t port_num, int index, ibv_gid* gid) {
  Context* context = context_of(verbs_ctx);
  const DeviceInfo& info = context->info();
  if (port_num < 1 || port_num > info.ports.size() || index < 0 ||
      static_cast<size_t>(index) >= info.ports[port_num - 1].gids.size()) {
    errno = EINVAL;
    return -1;
  }
  const GidSlot& slot = info.ports[port_num - 1].gids[index];
  *gid = slot.valid ? slot.gid : ibv_gid{};  // an empty slot reads as zeros
  return 0;
}

SOFTVERBS_API int _ibv_query_gid_ex(ibv_context* verbs_ctx, uint32_t port_num, uint32_t gid_index,
                                    ibv_gid_entry* entry, uint32_t flags, size_t entry_size) {
  Context* context = context_of(verbs_ctx);
  if (context == nullptr || entry == nullptr || flags != 0 || entry_size < sizeof(ibv_gid_entry)) {
    return EINVAL;
  }
  const DeviceInfo& info = context->info();
  if (port_num < 1 || port_num > info.ports.size()) return EINVAL;
  const PortInfo& port = info.ports[port_num - 1];
  if (gid_index >= port.gids.size()) return EINVAL;
  const GidSlot& slot = port.gids[gid_index];
  if (!slot.valid) return ENODATA;
  std::memset(entry, 0, entry_size);
  entry->gid = slot.gid;
  entry->gid_index = gid_index;
  entry->port_num = port_num;
  entry->gid_type = slot.type;
  entry->ndev_ifindex = info.ib ? 0 : info.ifindex;
  return 0;
}

SOFTVERBS_API ssize_t _ibv_query_gid_table(ibv_context* verbs_ctx, ibv_gid_entry* entries,
                                           size_t max_entries, uint32_t flags, size_t entry_size) {
  Context* context = context_of(verbs_ctx);
  if (context == nullptr || flags != 0 || entry_size < sizeof(ibv_gid_entry)) return -EINVAL;
  const DeviceInfo& info = context->info();
  size_t n = 0;
  for (uint32_t p = 1; p <= info.ports.size(); ++p) {
    for (uint32_t i = 0; i < info.ports[p - 1].gids.size(); ++i) {
      if (!info.ports[p - 1].gids[i].valid) continue;
      if (n == max_entries) return -ENOMEM;
      auto* entry =
          reinterpret_cast<ibv_gid_entry*>(reinterpret_cast<char*>(entries) + n * entry_size);
      _ibv_query_gid_ex(verbs_ctx, p, i, entry, 0, entry_size);
      ++n;
    }
  }
  return static_cast<ssize_t>(n);
}

SOFTVERBS_API int ibv_query_pkey(ibv_context* verbs_ctx, uint8_t port_num, int index,
                                 __be16* pkey) {
  Context* context = context_of(verbs_ctx);
  if (port_num < 1 || port_num > context->info().ports.size() || index != 0) {
    errno = EINVAL;
    return -1;
  }
  *pkey = htobe16(0xffff);
  return 0;
}
