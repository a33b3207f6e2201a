// One active port of a verbs device, opened: its context, protection
// domain, address (LID, GID), properties for NCCL, registration cache and
// its async events, read by the comms while they wait (no thread: NCCL may
// unload the plugin without calling finalize, v6..v10 have none), fatal
// ones turned into errors. Shared by every comm on that port.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "core/mr_cache.h"
#include "verbs/device_limits.h"
#include "verbs/ibverbs_api.h"
#include "verbs/wire.h"
#include "weft/params.h"
#include "weft/transport.h"

namespace weft::cuda {
class Driver;
}

namespace weft::verbs {

// unique_ptr for ibv objects, released by the library's own destroy call.
template <typename T>
using VerbsPtr = std::unique_ptr<T, int (*)(T*)>;

struct PortAddress {
  LinkLayer link_layer = LinkLayer::InfiniBand;
  uint16_t lid = 0;
  uint8_t gid[16] = {};
  int gid_index = 0;
  uint8_t active_mtu = IBV_MTU_1024;
};

// What NCCL holds as an mhandle.
struct MemoryHandle {
  static constexpr uint32_t kMagic = 0x4d525657;  // "WVRM"
  uint32_t magic = kMagic;
  uint32_t lkey = 0;
  uint32_t rkey = 0;
  int type = NCCL_PTR_HOST;
  ibv_mr* mr = nullptr;         // set when not shared through the cache
  void* cache_entry = nullptr;  // MrCache<ibv_mr*>::Entry
};

struct PortId {
  std::string device_name;  // ibv device name
  int port = 1;
  std::string nccl_name;  // unique name reported to NCCL
};

class OpenPort {
 public:
  // Opens port `id.port` of the device named `id.device_name`
  // and fills the properties. On failure nullptr and the reason in *reason.
  static std::unique_ptr<OpenPort> open(std::shared_ptr<const Ibverbs> ibverbs, const PortId& id,
                                        const Params& params, const cuda::Driver* cuda,
                                        std::string* reason);
  ~OpenPort();
  OpenPort(const OpenPort&) = delete;
  OpenPort& operator=(const OpenPort&) = delete;

  const IbverbsApi& api() const { return ibverbs_->api(); }
  const std::shared_ptr<const Ibverbs>& ibverbs() const { return ibverbs_; }
  const PortId& id() const { return id_; }
  ibv_context* context() const { return context_.get(); }
  ibv_pd* pd() const { return pd_.get(); }
  int port_number() const;
  const std::string& name() const { return id_.nccl_name; }
  const DeviceProperties& properties() const { return properties_; }
  const PortAddress& address() const { return address_; }
  const ibv_device_attr& device_attr() const { return device_attr_; }
  uint32_t max_message_size() const { return max_message_size_; }
  bool gpu_memory() const { return (properties_.ptr_support & NCCL_PTR_CUDA) != 0; }
  bool dmabuf() const { return (properties_.ptr_support & NCCL_PTR_DMABUF) != 0; }
  const cuda::Driver* cuda() const { return cuda_; }
  const std::string& gpu_off_reason() const { return gpu_off_reason_; }

  // Registers [data, data+size) for local and remote access (dma-buf when
  // fd >= 0). Logs and returns an NCCL error on failure.
  ncclResult_t register_memory(void* data, size_t size, int type, int dmabuf_fd,
                               uint64_t dmabuf_offset, MemoryHandle** out);
  ncclResult_t deregister_memory(MemoryHandle* handle);
  MrCacheStats cache_stats() const { return cache_->stats(); }
  // Queue pairs, completion queues and memory regions held on the device.
  DeviceLimits& limits() { return limits_; }
  const DeviceLimits& limits() const { return limits_; }

  // Reads the async events queued now, without blocking; several comms may
  // call it at once (one reads, the others return).
  void poll_async_events();
  // Fatal events seen so far (port down, device fatal); a comm compares
  // with what it saw at creation.
  uint32_t failures() const { return failures_.load(std::memory_order_acquire); }
  std::string failure_text() const;

 private:
  OpenPort(std::shared_ptr<const Ibverbs> ibverbs, const PortId& id);
  bool query(const Params& params, std::string* reason);
  void probe_gpu(const Params& params);
  ibv_mr* register_region(void* data, size_t size, int dmabuf_fd, uint64_t offset,
                          std::string* error);
  void handle_async_event(const ibv_async_event& event);
  void record_failure(const std::string& text);

  std::shared_ptr<const Ibverbs> ibverbs_;
  PortId id_;
  VerbsPtr<ibv_context> context_;
  VerbsPtr<ibv_pd> pd_;
  ibv_device_attr device_attr_{};
  PortAddress address_;
  uint32_t max_message_size_ = 1u << 30;
  DeviceProperties properties_;
  const cuda::Driver* cuda_ = nullptr;
  std::string gpu_off_reason_;
  bool relaxed_ordering_ = false;
  bool use_dmabuf_ = false;
  std::unique_ptr<MrCache<ibv_mr*>> cache_;
  DeviceLimits limits_;

  std::atomic<uint32_t> failures_{0};
  mutable std::mutex failure_mutex_;
  std::string failure_text_;
  std::mutex async_mutex_;
};

}  // namespace weft::verbs
