// The libfabric transport: a rail per provider domain, over a shared RDM
// endpoint per rail; NCCL's devices are single rails or groups of rails
// (rail_grouping.h, makeVDevice). Data moves with tagged messages or with
// the RDMA protocol (protocol_choice.h), which alone spreads over rails.
#pragma once

#include <deque>
#include <memory>
#include <mutex>
#include <vector>

#include "core/held_by_comms.h"
#include "core/peer_links.h"
#include "core/pending_connects.h"
#include "ofi/comm/send_comm.h"
#include "ofi/discovery/gpu_support.h"
#include "ofi/discovery/protocol_choice.h"
#include "ofi/discovery/provider_discovery.h"
#include "ofi/endpoint/endpoint.h"
#include "weft/one_sided.h"
#include "weft/params.h"
#include "weft/transport.h"

namespace weft::ofi {

class OfiTransport final : public Transport, public OneSidedTransport {
 public:
  static ncclResult_t create(const Params& params, std::unique_ptr<Transport>* out);
  // WEFT_TRANSPORT=auto: always used (the last in auto's order takes what
  // the others declined); the reason says why it got here.
  static AutoChoice auto_choice(const Params& params);
  ~OfiTransport() override;

  const char* name() const override { return "ofi"; }
  int device_count() const override;
  ncclResult_t properties(int dev, DeviceProperties* props) const override;
  // NCCL's makeVDevice: one device striping over several rails.
  ncclResult_t make_virtual_device(const std::vector<int>& devs, int* dev) override;

  // The handle carries rail 0's endpoint address; the other rails' addresses
  // come in the connect request and its acknowledgement.
  ncclResult_t listen(int dev, void* handle, ListenComm** listen_comm) override;
  ncclResult_t connect(int dev, const CommConfig& config, void* handle,
                       SendComm** send_comm) override;

  // One-sided comms (rma_comm.h) on each device's first rail, over an
  // endpoint of their own with FI_RMA and FI_ATOMIC.
  OneSidedTransport* one_sided() override { return this; }
  bool rma_supported(int dev, std::string* why) const override;
  ncclResult_t rma_listen(int dev, void* handle, RmaListenComm** listen) override;
  ncclResult_t rma_connect(void* const* handles, int nranks, int rank, RmaListenComm* listen,
                           RmaComm** comm) override;

 private:
  // A physical NIC: one provider domain.
  struct Rail {
    DiscoveredDevice discovered;
    uint32_t provider_hash = 0;
    GpuSupport gpu;
    ProtocolChoice protocol;
    // Nothing of the provider stays open once every comm is closed (shm
    // also names endpoints per process).
    HeldByComms<Endpoint> endpoint;
    // One-sided: the provider asked again for FI_RMA and FI_ATOMIC (null
    // when it has not: rma_off_reason says why), found on first use.
    bool rma_probed = false;
    InfoPtr rma_info;
    bool rma_ordered = false;  // writes and atomics stay in order (FI_ORDER_WAW)
    bool rma_atomics = false;  // signals by fi_atomic; else as messages
    std::string rma_off_reason;
    HeldByComms<Endpoint> rma_endpoint;
  };
  // What NCCL calls a device: one rail, or several (RDMA protocol only).
  struct Device {
    std::vector<int> rails;
    DeviceProperties properties;
  };

  OfiTransport() = default;
  ncclResult_t endpoint_for(int rail, std::shared_ptr<Endpoint>* out);
  // What both endpoints of a rail are opened with.
  EndpointOptions endpoint_options(const Rail& rail) const;
  // The rail's one-sided fi_info, probed once (rma_mutex_).
  const fi_info* rma_info(Rail& rail, std::string* why) const;
  ncclResult_t rma_endpoint_for(int rail, std::shared_ptr<Endpoint>* out);
  // Endpoints of every rail of `dev` that its comms use.
  ncclResult_t rail_endpoints(const Device& device, std::vector<std::shared_ptr<Endpoint>>* out);
  // A copy of device `dev`, or false (and a log naming `caller`).
  bool device_of(int dev, const char* caller, Device* out) const;
  Rail& first_rail(const Device& device) const { return *rails_[device.rails[0]]; }
  // Properties of a device over `rails` (speed summed when they all carry data).
  ncclResult_t settle_efa_settings(DiscoveredDevice* found, Rail* rail);
  DeviceProperties combined_properties(const std::vector<int>& rails) const;
  void add_device(Device device);

  // This process's liveness links, opened by the first listen or connect
  // and held by the comms (null when WEFT_PEER_TIMEOUT_MS=0 or no interface
  // can take them).
  std::shared_ptr<PeerLinks> peer_links();

  Params params_;
  WireMutation wire_mutation_ = WireMutation::kNone;  // WEFT_OFI_TEST_HOSTILE
  const cuda::Driver* cuda_ = nullptr;
  HeldByComms<PeerLinks> links_;
  bool links_refused_ = false;  // said once: no liveness links
  std::vector<std::unique_ptr<Rail>> rails_;
  mutable std::mutex rma_mutex_;
  mutable std::mutex devices_mutex_;  // makeVDevice appends while others read
  std::deque<Device> devices_;
  // Connections whose acknowledgement has not arrived.
  PendingConnects<OfiSendComm> pending_;
};

}  // namespace weft::ofi
