// The libfabric transport: one device per provider domain, over a shared
// RDM endpoint per device; data moves with tagged messages or with the
// RDMA protocol (protocol_choice.h).
#pragma once

#include <memory>
#include <mutex>
#include <vector>

#include "core/connect_cookies.h"
#include "ofi/endpoint.h"
#include "ofi/gpu_support.h"
#include "ofi/protocol_choice.h"
#include "ofi/provider_discovery.h"
#include "ofi/send_comm.h"
#include "weft/params.h"
#include "weft/transport.h"

namespace weft::ofi {

class OfiTransport final : public Transport {
 public:
  static ncclResult_t create(const Params& params, std::unique_ptr<Transport>* out);
  ~OfiTransport() override;

  const char* name() const override { return "ofi"; }
  int device_count() const override { return static_cast<int>(devices_.size()); }
  ncclResult_t properties(int dev, DeviceProperties* props) const override;
  ncclResult_t listen(int dev, void* handle, ListenComm** listen_comm) override;
  ncclResult_t connect(int dev, const CommConfig& config, void* handle,
                       SendComm** send_comm) override;

 private:
  struct Device {
    DiscoveredDevice discovered;
    uint32_t provider_hash = 0;
    GpuSupport gpu;
    ProtocolChoice protocol;
    std::mutex mutex;
    // Weak: an endpoint lives exactly as long as comms use it, so nothing
    // of the provider stays open once every comm is closed (NCCL may unload
    // and reload the plugin, and shm names endpoints per process).
    std::weak_ptr<Endpoint> endpoint;
  };

  OfiTransport() = default;
  ncclResult_t endpoint_for(int dev, std::shared_ptr<Endpoint>* out);
  bool valid_device(int dev, const char* caller) const;

  Params params_;
  const cuda::Driver* cuda_ = nullptr;
  std::vector<std::unique_ptr<Device>> devices_;
  // Connections whose acknowledgement has not arrived.
  PendingConnects<OfiSendComm> pending_;
};

}  // namespace weft::ofi
