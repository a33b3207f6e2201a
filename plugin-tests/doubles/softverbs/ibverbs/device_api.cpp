// Devices and contexts: listing, opening and closing devices, their
// attributes and their async events.

#include <endian.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "ibverbs/api.h"
#include "ibverbs/data_path.h"
#include "ibverbs/port_api.h"
#include "model/context.h"
#include "model/device.h"
#include "model/lifecycle.h"
#include "model/limits.h"

using namespace softverbs;

SOFTVERBS_API ibv_device** ibv_get_device_list(int* num_devices) {
  std::vector<Device*> devices = scan_devices();
  auto** list = static_cast<ibv_device**>(std::calloc(devices.size() + 1, sizeof(ibv_device*)));
  if (list == nullptr) {
    errno = ENOMEM;
    return nullptr;
  }
  for (size_t i = 0; i < devices.size(); ++i) list[i] = &devices[i]->handle.verbs;
  if (num_devices != nullptr) *num_devices = static_cast<int>(devices.size());
  return list;
}

SOFTVERBS_API void ibv_free_device_list(ibv_device** list) {
  std::free(list);
}

SOFTVERBS_API const char* ibv_get_device_name(ibv_device* device) {
  return device == nullptr ? nullptr : device->name;
}

SOFTVERBS_API __be64 ibv_get_device_guid(ibv_device* device) {
  return htobe64(owner_of<Device>(device)->info.node_guid);
}

SOFTVERBS_API int ibv_get_device_index(ibv_device* device) {
  return owner_of<Device>(device)->info.index;
}

SOFTVERBS_API ibv_context* ibv_open_device(ibv_device* verbs_device) {
  Device* device = owner_of<Device>(verbs_device);
  if (device == nullptr) {
    errno = EINVAL;
    return nullptr;
  }
  Context* context = open_context(device);
  if (context == nullptr) return nullptr;
  verbs_context& vctx = context->handle.verbs;
  vctx.query_port = query_port_ex;
  ibv_context& c = vctx.context;
  c.ops.post_send = post_send;
  c.ops.post_recv = post_recv;
  c.ops.poll_cq = poll_cq;
  c.ops.req_notify_cq = req_notify_cq;
  // A second personality linked into this library adds its ops.
  if (ContextExtension extend = context_extension()) extend(context);
  return &c;
}

SOFTVERBS_API int ibv_close_device(ibv_context* verbs_ctx) {
  return close_context(context_of(verbs_ctx));
}

SOFTVERBS_API int ibv_query_device(ibv_context* verbs_ctx, ibv_device_attr* attr) {
  Context* context = context_of(verbs_ctx);
  if (context == nullptr || attr == nullptr) return EINVAL;
  const DeviceInfo& info = context->info();
  const DeviceLimits limits = device_limits();
  std::memset(attr, 0, sizeof(*attr));
  std::snprintf(attr->fw_ver, sizeof(attr->fw_ver), info.efa ? "softefa 1.0" : "softverbs 1.0");
  attr->node_guid = htobe64(info.node_guid);
  attr->sys_image_guid = htobe64(info.node_guid);
  attr->max_mr_size = ~0ULL;
  attr->page_size_cap = 0xfffff000;
  attr->vendor_id = info.vendor_id;
  attr->vendor_part_id = info.vendor_part_id;
  attr->hw_ver = 1;
  attr->max_qp = limits.max_qp;
  attr->max_qp_wr = kMaxQpWr;
  attr->device_cap_flags = IBV_DEVICE_RC_RNR_NAK_GEN | IBV_DEVICE_PORT_ACTIVE_EVENT |
                           IBV_DEVICE_SYS_IMAGE_GUID | IBV_DEVICE_CHANGE_PHY_PORT;
  attr->max_sge = kMaxSge;
  attr->max_sge_rd = kMaxSge;
  attr->max_cq = limits.max_cq;
  attr->max_cqe = limits.max_cqe;
  attr->max_mr = limits.max_mr;
  attr->max_pd = 1 << 16;
  attr->max_qp_rd_atom = 16;
  attr->max_res_rd_atom = 16 << 10;
  attr->max_qp_init_rd_atom = 16;
  attr->atomic_cap = IBV_ATOMIC_NONE;
  attr->max_pkeys = 1;
  attr->local_ca_ack_delay = 15;
  attr->phys_port_cnt = static_cast<uint8_t>(info.ports.size());
  return 0;
}

SOFTVERBS_API int ibv_get_async_event(ibv_context* verbs_ctx, ibv_async_event* event) {
  Context* context = context_of(verbs_ctx);
  uint64_t v = 0;
  // Blocks (unless the caller made async_fd non-blocking) until one is queued.
  if (read(verbs_ctx->async_fd, &v, sizeof(v)) != static_cast<ssize_t>(sizeof(v))) return -1;
  std::lock_guard<std::mutex> lock(context->mu);
  if (context->events.empty()) {
    errno = EAGAIN;
    return -1;
  }
  *event = context->events.front();
  context->events.pop_front();
  return 0;
}

SOFTVERBS_API void ibv_ack_async_event(ibv_async_event* /*event*/) {}
