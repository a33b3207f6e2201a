#include "verbs/open_port.h"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>

#include "core/buffer_class.h"
#include "core/cuda/cuda_driver.h"
#include "core/sysfs.h"
#include "verbs/gid_select.h"
#include "weft/log.h"

namespace weft::verbs {
namespace {

constexpr int kRemoteAccess =
    IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;

int lane_mbps(unsigned active_speed) {
  switch (active_speed) {
    case 1:
      return 2500;  // SDR
    case 2:
      return 5000;  // DDR
    case 4:
      return 10000;  // QDR
    case 8:
      return 10000;  // FDR10
    case 16:
      return 14000;  // FDR
    case 32:
      return 25000;  // EDR
    case 64:
      return 50000;  // HDR
    case 128:
      return 100000;  // NDR
    case 256:
      return 200000;  // XDR
    default:
      return 0;
  }
}

int lanes(uint8_t active_width) {
  switch (active_width) {
    case 1:
      return 1;
    case 2:
      return 4;
    case 4:
      return 8;
    case 8:
      return 12;
    case 16:
      return 2;
    default:
      return 0;
  }
}

GidType gid_type_from_sysfs(const std::string& ibdev_path, int port, int index) {
  std::string text = sysfs::read_line(ibdev_path + "/ports/" + std::to_string(port) +
                                      "/gid_attrs/types/" + std::to_string(index));
  if (text.find("v2") != std::string::npos) return GidType::RoceV2;
  return GidType::RoceV1;
}

bool peer_memory_loaded() {
  for (const char* path :
       {"/sys/kernel/mm/memory_peers/nv_mem/version", "/sys/module/nvidia_peermem/version",
        "/sys/module/nv_peer_mem/version"}) {
    if (access(path, F_OK) == 0) return true;
  }
  return false;
}

int destroy_nothing(ibv_context*) {
  return 0;
}
int dealloc_nothing(ibv_pd*) {
  return 0;
}

}  // namespace

OpenPort::OpenPort(std::shared_ptr<const Ibverbs> ibverbs, const PortId& id)
    : ibverbs_(std::move(ibverbs)),
      id_(id),
      context_(nullptr, destroy_nothing),
      pd_(nullptr, dealloc_nothing),
      cache_(std::make_unique<MrCache<ibv_mr*>>(true, 65536)) {}

std::unique_ptr<OpenPort> OpenPort::open(std::shared_ptr<const Ibverbs> ibverbs, const PortId& id,
                                         const Params& params, const cuda::Driver* cuda,
                                         std::string* reason) {
  std::unique_ptr<OpenPort> port(new OpenPort(ibverbs, id));
  const IbverbsApi& api = ibverbs->api();
  int count = 0;
  ibv_device** list = api.get_device_list(&count);
  if (list == nullptr) {
    *reason = "ibv_get_device_list failed: " + std::string(std::strerror(errno));
    return nullptr;
  }
  ibv_device* device = nullptr;
  for (int d = 0; d < count && device == nullptr; ++d) {
    if (id.device_name == api.get_device_name(list[d])) device = list[d];
  }
  if (device != nullptr) {
    port->context_ = VerbsPtr<ibv_context>(api.open_device(device), api.close_device);
  }
  const int open_errno = errno;
  api.free_device_list(list);
  if (device == nullptr) {
    *reason = "the device is gone (not in ibv_get_device_list any more)";
    return nullptr;
  }
  if (!port->context_) {
    *reason = "ibv_open_device failed: " + std::string(std::strerror(open_errno));
    return nullptr;
  }
  port->pd_ = VerbsPtr<ibv_pd>(api.alloc_pd(port->context_.get()), api.dealloc_pd);
  if (!port->pd_) {
    *reason = "ibv_alloc_pd failed: " + std::string(std::strerror(errno));
    return nullptr;
  }
  port->cache_ = std::make_unique<MrCache<ibv_mr*>>(
      params.mr_cache, static_cast<size_t>(params.mr_cache_max_entries));
  port->cuda_ = cuda;
  if (!port->query(params, reason)) return nullptr;
  port->probe_gpu(params);
  int fd = port->context()->async_fd;
  int flags = fcntl(fd, F_GETFL);
  if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0) {
    *reason = "cannot make the async event fd non-blocking: " + std::string(std::strerror(errno));
    return nullptr;
  }
  return port;
}

OpenPort::~OpenPort() = default;

bool OpenPort::query(const Params& params, std::string* reason) {
  const IbverbsApi& api = this->api();
  if (api.query_device(context(), &device_attr_) != 0) {
    *reason = "ibv_query_device failed: " + std::string(std::strerror(errno));
    return false;
  }
  ibv_port_attr port{};
  if (api.query_port(context(), static_cast<uint8_t>(port_number()), &port) != 0) {
    *reason = "ibv_query_port failed: " + std::string(std::strerror(errno));
    return false;
  }
  address_.link_layer =
      port.link_layer == IBV_LINK_LAYER_ETHERNET ? LinkLayer::Ethernet : LinkLayer::InfiniBand;
  address_.lid = port.lid;
  address_.active_mtu = static_cast<uint8_t>(port.active_mtu);
  if (port.max_msg_sz > 0) max_message_size_ = port.max_msg_sz;

  const std::string ibdev_path = context()->device->ibdev_path;
  if (address_.link_layer == LinkLayer::Ethernet) {
    std::vector<GidEntry> table;
    for (int i = 0; i < port.gid_tbl_len; ++i) {
      GidEntry entry;
      entry.index = i;
      ibv_gid_entry extended{};
      if (api.query_gid_ex != nullptr &&
          api.query_gid_ex(context(), static_cast<uint32_t>(port_number()),
                           static_cast<uint32_t>(i), &extended, 0, sizeof(extended)) == 0) {
        std::memcpy(entry.gid, extended.gid.raw, 16);
        entry.type = extended.gid_type == IBV_GID_TYPE_ROCE_V2 ? GidType::RoceV2 : GidType::RoceV1;
      } else {
        ibv_gid gid{};
        if (api.query_gid(context(), static_cast<uint8_t>(port_number()), i, &gid) != 0) continue;
        std::memcpy(entry.gid, gid.raw, 16);
        entry.type = gid_type_from_sysfs(ibdev_path, port_number(), i);
      }
      table.push_back(entry);
    }
    GidPolicy policy;
    policy.index = static_cast<int>(params.ib_gid_index);
    policy.ipv4 = params.ib_addr_family != "AF_INET6";
    policy.roce_version = static_cast<int>(params.ib_roce_version_num);
    if (!params.ib_addr_range.empty()) {
      std::string error;
      if (!parse_subnet(params.ib_addr_range, &policy.range, &error)) {
        *reason = "WEFT_IB_ADDR_RANGE: " + error;
        return false;
      }
      policy.has_range = true;
    }
    int index = -1;
    if (!select_gid(table, policy, &index, reason)) return false;
    for (const GidEntry& entry : table) {
      if (entry.index == index) std::memcpy(address_.gid, entry.gid, 16);
    }
    address_.gid_index = index;
  } else {
    address_.gid_index = params.ib_gid_index >= 0 ? static_cast<int>(params.ib_gid_index) : 0;
    ibv_gid gid{};
    if (api.query_gid(context(), static_cast<uint8_t>(port_number()), address_.gid_index, &gid) ==
        0) {
      std::memcpy(address_.gid, gid.raw, 16);
    }
    if (port.lid == 0) {
      *reason = "InfiniBand port without a LID (is a subnet manager running?)";
      return false;
    }
  }

  properties_.name = id_.nccl_name;
  properties_.pci_path = sysfs::realpath_of(ibdev_path + "/device");
  uint64_t guid = 0;
  for (int i = 0; i < 8; ++i) {
    guid = (guid << 8) | reinterpret_cast<const uint8_t*>(&device_attr_.node_guid)[i];
  }
  properties_.guid = guid;
  properties_.port = port_number();
  int mbps = lane_mbps(port.active_speed) * lanes(port.active_width);
  properties_.speed_mbps = mbps > 0 ? mbps : static_cast<int>(params.default_speed_mbps);
  properties_.latency_us = 0;
  limits_.configure(id_.nccl_name, device_attr_);
  // A send comm's queue pairs and completion queue (receive comms take a
  // few more: the limits' errors say which).
  properties_.max_comms = std::min(limits_.limit(DeviceObject::QueuePair) /
                                       std::max(1, static_cast<int>(params.ib_qps_per_connection)),
                                   limits_.limit(DeviceObject::CompletionQueue));
  properties_.max_recvs = kMaxRecvs;
  uint64_t max_p2p = std::min<uint64_t>(max_message_size_, kImmSizesInFifo - 1);
  if (params.max_p2p_bytes > 0) max_p2p = std::min<uint64_t>(max_p2p, params.max_p2p_bytes);
  properties_.max_p2p_bytes = max_p2p;
  properties_.reg_is_global = params.mr_cache;
  properties_.force_flush = params.force_flush;
  properties_.ptr_support = NCCL_PTR_HOST;
  relaxed_ordering_ = params.ib_relaxed_ordering && api.reg_mr_iova2 != nullptr;
  return true;
}

int OpenPort::port_number() const {
  return id_.port;
}

void OpenPort::probe_gpu(const Params& params) {
  if (cuda_ == nullptr) {
    gpu_off_reason_ = params.gpu == "off" ? "WEFT_GPU=off" : "no usable CUDA driver";
    return;
  }
  if (cuda_->device_count() == 0 || !cuda_->gdr_supported(0)) {
    gpu_off_reason_ = "the GPU does not report GPUDirect RDMA support";
    return;
  }
  bool dmabuf = false;
  if (api().reg_dmabuf_mr != nullptr) {
    // NCCL's probe: an invalid fd fails with EBADF where dma-buf
    // registration exists, EOPNOTSUPP/EPROTONOSUPPORT where it does not.
    errno = 0;
    ibv_mr* mr = api().reg_dmabuf_mr(pd(), 0, 0, 0, -1, 0);
    if (mr != nullptr) {
      api().dereg_mr(mr);
    } else {
      dmabuf = errno != EOPNOTSUPP && errno != EPROTONOSUPPORT;
    }
  }
  dmabuf = dmabuf && cuda_->dmabuf_supported(0);
  const bool peer_memory = peer_memory_loaded();
  if (!dmabuf && !peer_memory) {
    gpu_off_reason_ =
        "neither dma-buf registration nor nvidia-peermem is available (load nvidia-peermem, or "
        "use Linux >= 5.12 with a NIC driver that supports dma-buf)";
    return;
  }
  properties_.ptr_support |= NCCL_PTR_CUDA;
  if (dmabuf && params.dmabuf) properties_.ptr_support |= NCCL_PTR_DMABUF;
  use_dmabuf_ = dmabuf && params.dmabuf;
}

ibv_mr* OpenPort::register_region(void* data, size_t size, int dmabuf_fd, uint64_t offset,
                                  std::string* error) {
  const IbverbsApi& api = this->api();
  int access = kRemoteAccess;
  // One-sided signals land as remote fetch-and-adds where the device has them.
  if (device_attr_.atomic_cap != IBV_ATOMIC_NONE) access |= IBV_ACCESS_REMOTE_ATOMIC;
  ibv_mr* mr = nullptr;
  errno = 0;
  if (dmabuf_fd >= 0) {
    mr = api.reg_dmabuf_mr(pd(), offset, size, reinterpret_cast<uint64_t>(data), dmabuf_fd, access);
    if (mr == nullptr) *error = "ibv_reg_dmabuf_mr failed: ";
  } else if (relaxed_ordering_) {
    mr = api.reg_mr_iova2(pd(), data, size, reinterpret_cast<uint64_t>(data),
                          static_cast<unsigned>(access | IBV_ACCESS_RELAXED_ORDERING));
    if (mr == nullptr) *error = "ibv_reg_mr_iova2 failed: ";
  } else {
    mr = api.reg_mr(pd(), data, size, access);
    if (mr == nullptr) *error = "ibv_reg_mr failed: ";
  }
  if (mr == nullptr) {
    const int failure = errno != 0 ? errno : EINVAL;
    *error += std::strerror(failure);
    if (failure == ENOMEM) *error += limits_.refusal_context(DeviceObject::MemoryRegion);
  }
  return mr;
}

ncclResult_t OpenPort::register_memory(void* data, size_t size, int type, int dmabuf_fd,
                                       uint64_t dmabuf_offset, MemoryHandle** out) {
  *out = nullptr;
  const char* kind = type == NCCL_PTR_CUDA ? "GPU" : "host";
  BufferClass buffer;
  ncclResult_t result = classify_buffer(name(), gpu_memory() ? cuda_ : nullptr, gpu_off_reason_,
                                        data, size, type, &buffer);
  if (result != ncclSuccess) return result;
  MrKey key = page_key(data, size, buffer);
  int fd = -1;
  bool owns_fd = false;
  uint64_t offset = 0;
  void* start = data;
  size_t length = std::max<size_t>(size, 1);
  if (type == NCCL_PTR_CUDA) {
    if (dmabuf_fd >= 0 && use_dmabuf_) {
      fd = dmabuf_fd;
      offset = dmabuf_offset;
    } else if (use_dmabuf_) {
      // The pages around the buffer, clipped to its allocation: a dma-buf
      // is exported from one allocation.
      key = clipped_to_allocation(key, buffer);
      std::string error;
      if (!cuda_->export_dmabuf(reinterpret_cast<void*>(key.start), key.end - key.start, &fd,
                                &error)) {
        WEFT_WARN("%s: cannot export a dma-buf for GPU memory at %p: %s", name().c_str(), data,
                  error.c_str());
        return ncclUnhandledCudaError;
      }
      owns_fd = true;
    }
  }
  if (fd < 0 || owns_fd) {
    start = reinterpret_cast<void*>(key.start);
    length = key.end - key.start;
  }
  bool cacheable = fd < 0 || owns_fd;
  if (cacheable) {
    if (auto* entry = cache_->acquire(key)) {
      if (owns_fd) ::close(fd);
      auto* handle = new MemoryHandle;
      handle->type = type;
      handle->lkey = entry->registration->lkey;
      handle->rkey = entry->registration->rkey;
      handle->cache_entry = entry;
      *out = handle;
      return ncclSuccess;
    }
  }
  std::string error;
  if (!limits_.take(DeviceObject::MemoryRegion, 1, &error)) {
    if (owns_fd) ::close(fd);
    WEFT_WARN("%s: registering %zu bytes of %s memory at %p: %s", name().c_str(), size, kind, data,
              error.c_str());
    return ncclSystemError;
  }
  ibv_mr* mr = register_region(start, length, fd, offset, &error);
  if (owns_fd) ::close(fd);
  if (mr == nullptr) {
    limits_.release(DeviceObject::MemoryRegion, 1);
    WEFT_WARN("%s: registering %zu bytes of %s memory at %p failed: %s%s", name().c_str(), size,
              kind, data, error.c_str(),
              type == NCCL_PTR_CUDA
                  ? " (is GPUDirect RDMA available: nvidia-peermem or dma-buf?)"
                  : " (check `ulimit -l`: RDMA needs a large locked-memory limit)");
    return ncclSystemError;
  }
  auto* handle = new MemoryHandle;
  handle->type = type;
  handle->lkey = mr->lkey;
  handle->rkey = mr->rkey;
  if (cacheable) handle->cache_entry = cache_->insert(key, mr);
  if (handle->cache_entry == nullptr) handle->mr = mr;
  *out = handle;
  return ncclSuccess;
}

ncclResult_t OpenPort::deregister_memory(MemoryHandle* handle) {
  if (handle == nullptr || handle->magic != MemoryHandle::kMagic) {
    WEFT_WARN("%s: deregMr of %p, which is not a weft verbs registration", name().c_str(),
              static_cast<void*>(handle));
    return ncclInvalidArgument;
  }
  ibv_mr* mr = handle->mr;
  if (handle->cache_entry != nullptr) {
    ibv_mr* last = nullptr;
    auto* entry = static_cast<MrCache<ibv_mr*>::Entry*>(handle->cache_entry);
    if (cache_->release(entry, &last)) mr = last;
  }
  handle->magic = 0;
  delete handle;
  if (mr != nullptr && api().dereg_mr(mr) != 0) {
    WEFT_WARN("%s: ibv_dereg_mr failed: %s", name().c_str(), std::strerror(errno));
    return ncclSystemError;
  }
  if (mr != nullptr) limits_.release(DeviceObject::MemoryRegion, 1);
  return ncclSuccess;
}

std::string OpenPort::failure_text() const {
  std::lock_guard<std::mutex> lock(failure_mutex_);
  return failure_text_;
}

void OpenPort::record_failure(const std::string& text) {
  {
    std::lock_guard<std::mutex> lock(failure_mutex_);
    failure_text_ = text;
  }
  failures_.fetch_add(1, std::memory_order_acq_rel);
  WEFT_WARN("%s: %s; its connections fail", name().c_str(), text.c_str());
}

void OpenPort::poll_async_events() {
  std::unique_lock<std::mutex> lock(async_mutex_, std::try_to_lock);
  if (!lock.owns_lock()) return;
  pollfd fd{context()->async_fd, POLLIN, 0};
  while (poll(&fd, 1, 0) > 0 && (fd.revents & POLLIN) != 0) {
    ibv_async_event event{};
    if (api().get_async_event(context(), &event) != 0) return;
    handle_async_event(event);
    api().ack_async_event(&event);
  }
}

void OpenPort::handle_async_event(const ibv_async_event& event) {
  const char* what = api().event_type_str(event.event_type);
  switch (event.event_type) {
    case IBV_EVENT_PORT_ERR:
      if (event.element.port_num == port_number()) {
        record_failure("port " + std::to_string(port_number()) + " went down (async event " + what +
                       ")");
      }
      break;
    case IBV_EVENT_DEVICE_FATAL:
      record_failure(std::string("device fatal error (async event ") + what + ")");
      break;
    case IBV_EVENT_QP_FATAL:
    case IBV_EVENT_QP_REQ_ERR:
    case IBV_EVENT_QP_ACCESS_ERR:
    case IBV_EVENT_CQ_ERR:
    case IBV_EVENT_SRQ_ERR:
      WEFT_WARN("%s: async event %s; the affected connection fails with its next completion",
                name().c_str(), what);
      break;
    default:
      WEFT_INFO(NCCL_NET, "%s: async event %s", name().c_str(), what);
      break;
  }
}

}  // namespace weft::verbs
