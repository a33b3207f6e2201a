// The native verbs transport: NCCL's devices are the active ports that
// port_discovery found; comms connect RC queue pairs through a TCP side
// channel whose address is in the listen handle.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/held_by_comms.h"
#include "core/pending_connects.h"
#include "core/socket_address.h"
#include "verbs/listener_hub.h"
#include "verbs/port_discovery.h"
#include "verbs/recv_comm.h"
#include "verbs/send_comm.h"
#include "weft/one_sided.h"
#include "weft/params.h"
#include "weft/transport.h"

namespace weft::verbs {

class VerbsTransport final : public Transport, public OneSidedTransport {
 public:
  // From ports already discovered (at least one).
  VerbsTransport(const Params& params, DiscoveredPorts ports);
  ~VerbsTransport() override;
  // Discovers and opens; fails (logging what was found and what to set)
  // when there is no usable port.
  static ncclResult_t create(const Params& params, std::unique_ptr<Transport>* out);
  // WEFT_TRANSPORT=auto: used where there are active InfiniBand/RoCE ports
  // and no EFA device (libfabric drives EFA), unless WEFT_OFI_PROVIDER
  // names a libfabric provider.
  static AutoChoice auto_choice(const Params& params);

  const char* name() const override { return "verbs"; }
  // One NCCL device per port: no virtual devices (makeVDevice is refused).
  int device_count() const override { return static_cast<int>(ports_.size()); }
  ncclResult_t properties(int dev, DeviceProperties* props) const override;

  // The side channel's address goes in the handle; the queue pairs are
  // set up over it across connect/accept calls.
  ncclResult_t listen(int dev, void* handle, ListenComm** listen_comm) override;
  ncclResult_t connect(int dev, const CommConfig& config, void* handle,
                       SendComm** send_comm) override;

  // Queue pairs the announced connections need (WEFT_IB_QPS_PER_CONNECTION
  // per send comm, one more per receive comm for its flush) against what
  // each open port has left.
  std::string connection_budget_problem(const ConnectionHints& hints) override;

  // One-sided (verbs/rma_comm.h): every port; a listen comm has a TCP
  // listener of its own for the ranks to find each other.
  OneSidedTransport* one_sided() override { return this; }
  bool rma_supported(int dev, std::string* why) const override;
  ncclResult_t rma_listen(int dev, void* handle, RmaListenComm** listen) override;
  ncclResult_t rma_connect(void* const* handles, int nranks, int rank, RmaListenComm* listen,
                           RmaComm** comm) override;

 private:
  bool valid_device(int dev, const char* caller) const;
  // The OpenPort of `dev`, opening it when no comm holds one.
  ncclResult_t port_for(int dev, const char* caller, std::shared_ptr<OpenPort>* out);
  QpSettings qp_settings(const CommConfig* config) const;
  // What both sides' ports must agree on: the link layer.
  uint32_t fingerprint(int dev) const;
  // The side channel's local address, chosen once: every listen asking
  // getifaddrs (a netlink dump) cost a tenth of a 10^4-listen setup.
  bool side_channel_address(SocketAddress* local, std::string* ifname, std::string* error);
  std::shared_ptr<PeerLinks> peer_links();
  // The process's side-channel listener, opened by the first listen.
  ncclResult_t listener_hub(const std::string& device, std::shared_ptr<ListenerHub>* out);

  // A port as discovered. Its OpenPort (context, PD, MR cache) is opened by
  // the first comm and held only by comms: NCCL v6..v10 unload the plugin
  // without finalize, so whatever the transport held would stay open.
  struct Port {
    PortId id;
    DeviceProperties properties;
    LinkLayer link_layer = LinkLayer::InfiniBand;
    HeldByComms<OpenPort> open;
  };

  Params params_;
  std::shared_ptr<const Ibverbs> ibverbs_;
  const cuda::Driver* cuda_ = nullptr;
  std::vector<std::unique_ptr<Port>> ports_;
  std::atomic<uint32_t> next_listen_id_{1};
  std::mutex side_address_mutex_;
  bool side_address_known_ = false;
  SocketAddress side_address_;
  std::string side_ifname_;
  PendingConnects<VerbsSendComm> pending_;
  HeldByComms<PeerLinks> links_;
  HeldByComms<ListenerHub> hub_;
  bool links_refused_ = false;  // said once: no liveness links
};

}  // namespace weft::verbs
