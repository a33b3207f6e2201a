#include "verbs/verbs_transport.h"

#include <sys/socket.h>

#include <climits>
#include <cstring>

#include "core/comm_id.h"
#include "core/connect_resume.h"
#include "core/cuda/cuda_driver.h"
#include "core/device_limit_log.h"
#include "core/flush_method.h"
#include "core/handle_header.h"
#include "core/listen_secret.h"
#include "verbs/gid_select.h"
#include "verbs/listen_comm.h"
#include "verbs/rma_comm.h"
#include "weft/log.h"

namespace weft::verbs {
namespace {

std::string joined(const std::vector<std::string>& notes) {
  std::string text;
  for (const std::string& note : notes) text += (text.empty() ? "" : "; ") + note;
  return text.empty() ? "no verbs devices" : text;
}

}  // namespace

VerbsTransport::VerbsTransport(const Params& params, DiscoveredPorts ports)
    : params_(params),
      ibverbs_(ports.ports.front()->ibverbs()),
      cuda_(ports.ports.front()->cuda()) {
  // One line per port, however the transport was chosen (auto or verbs).
  for (size_t i = 0; i < ports.ports.size(); ++i) {
    const OpenPort& opened = *ports.ports[i];
    const DeviceProperties& props = opened.properties();
    auto port = std::make_unique<Port>();
    port->id = opened.id();
    port->properties = props;
    port->link_layer = opened.address().link_layer;
    ports_.push_back(std::move(port));
    WEFT_INFO(NCCL_INIT, "NIC %zu: %s port %d, %s, GID index %d (%s), %d Mbps, %s%s", i,
              props.name.c_str(), props.port,
              opened.address().link_layer == LinkLayer::Ethernet ? "RoCE" : "InfiniBand",
              opened.address().gid_index, gid_text(opened.address().gid).c_str(), props.speed_mbps,
              opened.gpu_memory() ? "GPU memory" : "host memory only: ",
              opened.gpu_memory() ? (opened.dmabuf() ? " (dma-buf)" : " (peer memory)")
                                  : opened.gpu_off_reason().c_str());
    log_memory_region_limit(props.name,
                            opened.limits().limit(DeviceObject::MemoryRegion) == INT_MAX
                                ? -1
                                : opened.limits().limit(DeviceObject::MemoryRegion),
                            "ibv_query_device max_mr, shared by every process on the device");
  }
  // `ports` closes each port's context here; comms reopen them.
}

VerbsTransport::~VerbsTransport() {
  pending_.abandon_all([](VerbsSendComm* comm) { delete comm; });
}

ncclResult_t VerbsTransport::create(const Params& params, std::unique_ptr<Transport>* out) {
  const cuda::Driver* cuda = params.gpu == "off" ? nullptr : cuda::Driver::shared(params.cuda_lib);
  DiscoveredPorts ports;
  std::string reason;
  if (!discover_ports(params, cuda, &ports, &reason)) {
    WEFT_WARN("verbs transport unavailable: %s", reason.c_str());
    return ncclSystemError;
  }
  if (ports.ports.empty()) {
    WEFT_WARN(
        "verbs transport: no usable port (%s); check `ibv_devinfo`, WEFT_IB_HCA / "
        "NCCL_IB_HCA, or use WEFT_TRANSPORT=ofi",
        joined(ports.notes).c_str());
    return ncclSystemError;
  }
  *out = std::make_unique<VerbsTransport>(params, std::move(ports));
  return ncclSuccess;
}

AutoChoice VerbsTransport::auto_choice(const Params& params) {
  AutoChoice choice;
  if (!params.ofi_provider.empty()) {
    choice.reason = "WEFT_OFI_PROVIDER names a libfabric provider";
    return choice;
  }
  const cuda::Driver* cuda = params.gpu == "off" ? nullptr : cuda::Driver::shared(params.cuda_lib);
  DiscoveredPorts ports;
  if (!discover_ports(params, cuda, &ports, &choice.reason)) return choice;
  if (ports.efa_devices > 0) {
    choice.reason = std::to_string(ports.efa_devices) + " EFA device(s), which libfabric drives";
  } else if (ports.ports.empty()) {
    choice.reason = "no active InfiniBand/RoCE port";
  } else {
    choice.use = true;
    choice.reason = "auto: " + std::to_string(ports.ports.size()) + " InfiniBand/RoCE port(s)";
    choice.opened = std::make_unique<VerbsTransport>(params, std::move(ports));
  }
  return choice;
}

bool VerbsTransport::valid_device(int dev, const char* caller) const {
  if (dev >= 0 && dev < device_count()) return true;
  WEFT_WARN("%s: device %d does not exist (%d devices)", caller, dev, device_count());
  return false;
}

ncclResult_t VerbsTransport::properties(int dev, DeviceProperties* props) const {
  if (!valid_device(dev, "getProperties")) return ncclInvalidArgument;
  *props = ports_[static_cast<size_t>(dev)]->properties;
  return ncclSuccess;
}

ncclResult_t VerbsTransport::port_for(int dev, const char* caller, std::shared_ptr<OpenPort>* out) {
  if (!valid_device(dev, caller)) return ncclInvalidArgument;
  Port& port = *ports_[static_cast<size_t>(dev)];
  auto open = [&](std::shared_ptr<OpenPort>* opened) {
    std::string why;
    *opened = OpenPort::open(ibverbs_, port.id, params_, cuda_, &why);
    if (*opened) return ncclSuccess;
    WEFT_WARN("%s on %s: cannot open the device: %s", caller, port.properties.name.c_str(),
              why.c_str());
    return ncclSystemError;
  };
  return port.open.get([](const OpenPort&) { return true; }, open, out);
}

uint32_t VerbsTransport::fingerprint(int dev) const {
  return 0x56420000u | static_cast<uint32_t>(ports_[static_cast<size_t>(dev)]->link_layer);
}

QpSettings VerbsTransport::qp_settings(const CommConfig* config) const {
  QpSettings settings;
  settings.traffic_class = static_cast<int>(params_.ib_tc);
  if (config != nullptr && config->traffic_class >= 0)
    settings.traffic_class = config->traffic_class;
  settings.service_level = static_cast<int>(params_.ib_sl);
  settings.timeout = static_cast<int>(params_.ib_timeout);
  settings.retry_count = static_cast<int>(params_.ib_retry_cnt);
  settings.pkey_index = static_cast<int>(params_.ib_pkey);
  settings.ece = params_.ib_ece_enable;
  return settings;
}

bool VerbsTransport::side_channel_address(SocketAddress* local, std::string* ifname,
                                          std::string* error) {
  std::lock_guard<std::mutex> lock(side_address_mutex_);
  if (!side_address_known_) {
    if (!pick_local_address(params_.socket_ifname, AF_UNSPEC, &side_address_, &side_ifname_,
                            error)) {
      return false;
    }
    side_address_known_ = true;
  }
  *local = side_address_;
  *ifname = side_ifname_;
  return true;
}

std::shared_ptr<PeerLinks> VerbsTransport::peer_links() {
  return shared_peer_links(&links_, params_.socket_ifname,
                           static_cast<int>(params_.peer_timeout_ms), &links_refused_);
}

ncclResult_t VerbsTransport::listener_hub(const std::string& device,
                                          std::shared_ptr<ListenerHub>* out) {
  auto open = [&](std::shared_ptr<ListenerHub>* opened) {
    SocketAddress local;
    std::string ifname;
    std::string error;
    if (!side_channel_address(&local, &ifname, &error)) {
      WEFT_WARN("%s: no interface for the connection side channel: %s", device.c_str(),
                error.c_str());
      return ncclSystemError;
    }
    *opened = ListenerHub::open(local, static_cast<int>(params_.connect_timeout_ms), &error);
    if (!*opened) {
      WEFT_WARN("%s: cannot listen on %s: %s", device.c_str(), local.text().c_str(), error.c_str());
      return ncclSystemError;
    }
    WEFT_INFO(NCCL_NET, "verbs side channel listening on %s (%s), for every listen",
              (*opened)->address().text().c_str(), ifname.c_str());
    return ncclSuccess;
  };
  return hub_.get([](const ListenerHub&) { return true; }, open, out);
}

ncclResult_t VerbsTransport::listen(int dev, void* handle, ListenComm** listen_comm) {
  *listen_comm = nullptr;
  std::shared_ptr<OpenPort> port;
  if (ncclResult_t result = port_for(dev, "listen", &port); result != ncclSuccess) return result;
  std::shared_ptr<ListenerHub> hub;
  if (ncclResult_t result = listener_hub(port->name(), &hub); result != ncclSuccess) return result;
  uint64_t secret = 0;
  if (!fresh_listen_secret(&secret)) return ncclSystemError;
  uint32_t listen_id = next_listen_id_.fetch_add(1) & kMaxCommId;
  if (listen_id == 0) listen_id = next_listen_id_.fetch_add(1) & kMaxCommId;
  RecvOptions options;
  options.links = peer_links();
  // Connectors with links of their own send their info to this mailbox,
  // over the link to this process, instead of connecting to the hub.
  const uint32_t mailbox = options.links ? options.links->open_mailbox() : 0;
  ListenHandle encoded;
  encoded.transport = TransportId::Verbs;
  encoded.fingerprint = fingerprint(dev);
  encoded.listen_id = listen_id;
  encoded.secret = secret;
  encode_listen_payload(hub->address(), options.links ? options.links->identity() : PeerIdentity{},
                        mailbox, &encoded);
  encode_handle(encoded, handle);
  options.qp_settings = qp_settings(nullptr);
  // Every verbs port reads through a loopback queue pair; cuda is taken as
  // asked (iflush names a driver without cuFlushGPUDirectRDMAWrites).
  options.flush = choose_flush(params_.gdr_flush, true, true);
  options.peer_timeout_ms = static_cast<int>(params_.peer_timeout_ms);
  WEFT_INFO(NCCL_NET, "%s: listener %u on %s, mailbox %u", port->name().c_str(), listen_id,
            hub->address().text().c_str(), mailbox);
  *listen_comm = new VerbsListenComm(std::move(port), std::move(hub), listen_id, secret, mailbox,
                                     options, static_cast<int>(params_.connect_timeout_ms));
  return ncclSuccess;
}

ncclResult_t VerbsTransport::connect(int dev, const CommConfig& config, void* handle,
                                     SendComm** send_comm) {
  *send_comm = nullptr;
  std::shared_ptr<OpenPort> port;
  if (ncclResult_t result = port_for(dev, "connect", &port); result != ncclSuccess) return result;
  const uint32_t expected = fingerprint(dev);
  auto check = [&](const ListenHandle& decoded) {
    if (decoded.fingerprint == expected) return ncclSuccess;
    WEFT_WARN(
        "connect on %s: the peer listens on a %s port, this one is %s; select matching "
        "ports with WEFT_IB_HCA / NCCL_IB_HCA",
        port->name().c_str(),
        (decoded.fingerprint & 0xff) == static_cast<uint32_t>(LinkLayer::Ethernet) ? "RoCE"
                                                                                   : "InfiniBand",
        port->address().link_layer == LinkLayer::Ethernet ? "RoCE" : "InfiniBand");
    return ncclInvalidUsage;
  };
  auto build = [&](const ListenHandle& decoded, std::unique_ptr<VerbsSendComm>* out) {
    std::string error;
    ListenPayload listener;
    if (!decode_listen_payload(decoded, &listener, &error)) {
      WEFT_WARN("connect on %s: bad handle: %s", port->name().c_str(), error.c_str());
      return ncclInvalidArgument;
    }
    const SocketAddress& peer = listener.hub;
    SendOptions options;
    options.qp_count = static_cast<int>(params_.ib_qps_per_connection);
    options.split_data = params_.ib_split_data_on_qps;
    options.adaptive_routing = params_.ib_adaptive_routing < 0
                                   ? port->address().link_layer == LinkLayer::InfiniBand
                                   : params_.ib_adaptive_routing == 1;
    options.ar_threshold = static_cast<size_t>(params_.ib_ar_threshold);
    options.use_inline = params_.ib_use_inline;
    options.qp_settings = qp_settings(&config);
    ConnectionSetup setup;
    setup.port = port;
    setup.peer_name = peer.text();
    setup.peer_timeout_ms = static_cast<int>(params_.peer_timeout_ms);
    setup.links = peer_links();
    // Over the link to the listener's process where both have links (one
    // connection for all the comms between two processes); else a TCP
    // connection to its hub for this comm alone.
    if (setup.links && listener.mailbox != 0) {
      // Its hello presents the listen secret: the listener admits it.
      std::shared_ptr<PeerLink> link =
          setup.links->link_to(listener.process, decoded.secret, peer.text());
      std::string why;
      if (link && link->usable(&why)) {
        setup.link = std::move(link);
        setup.peer_mailbox = listener.mailbox;
      } else if (link) {
        WEFT_INFO(NCCL_NET, "connect on %s to %s over its own connection: %s", port->name().c_str(),
                  peer.text().c_str(), why.c_str());
      }
    }
    if (!setup.link &&
        !TcpStream::connect(peer, &setup.stream, &error, kOpenListenerRefusalGrace)) {
      WEFT_WARN("connect on %s: %s", port->name().c_str(), error.c_str());
      return ncclRemoteError;
    }
    QpCapacity capacity{static_cast<uint32_t>(kFifoSlots * (kMaxRecvs + 2) + 4), 4, 256};
    if (!setup.qps.create(*port, options.qp_count, capacity, &error)) {
      WEFT_WARN("connect on %s: %s", port->name().c_str(), error.c_str());
      return ncclSystemError;
    }
    auto comm = std::make_unique<VerbsSendComm>(std::move(setup), options, decoded.listen_id,
                                                decoded.secret);
    if (!comm->prepare(&error)) {
      WEFT_WARN("connect on %s: %s", port->name().c_str(), error.c_str());
      return ncclSystemError;
    }
    comm->connect_deadline =
        std::chrono::steady_clock::now() + std::chrono::milliseconds(params_.connect_timeout_ms);
    *out = std::move(comm);
    return ncclSuccess;
  };
  auto step = [&](VerbsSendComm& comm, bool* connected) {
    std::string error;
    switch (comm.advance_setup(&error)) {
      case SetupProgress::Failed:
        WEFT_WARN("connect on %s to %s failed: %s", port->name().c_str(), comm.peer_name().c_str(),
                  error.c_str());
        return ncclRemoteError;
      case SetupProgress::Pending:
        if (std::chrono::steady_clock::now() >= comm.connect_deadline) {
          WEFT_WARN("connect on %s to %s: no answer within WEFT_CONNECT_TIMEOUT_MS=%lld ms",
                    port->name().c_str(), comm.peer_name().c_str(),
                    static_cast<long long>(params_.connect_timeout_ms));
          return ncclRemoteError;
        }
        return ncclSuccess;
      case SetupProgress::Done:
        *connected = true;
        return ncclSuccess;
    }
    return ncclInternalError;
  };
  return resume_connect(pending_, TransportId::Verbs, port->name(), handle, check, build, step,
                        send_comm);
}

std::string VerbsTransport::connection_budget_problem(const ConnectionHints& hints) {
  auto comms = [](int peers, int flows) {
    return peers > 0 && flows > 0 ? static_cast<long long>(peers) * flows : 0;
  };
  const long long qps = static_cast<long long>(params_.ib_qps_per_connection);
  const long long sends = comms(hints.send_peers, hints.send_flows);
  const long long receives = comms(hints.recv_peers, hints.recv_flows);
  const long long needed = sends * qps + receives * (qps + 1);
  if (needed == 0) return "";
  for (const auto& port : ports_) {
    std::shared_ptr<OpenPort> open = port->open.peek();
    if (!open) continue;  // not listened or connected on yet
    const DeviceLimits& limits = open->limits();
    const int limit = limits.limit(DeviceObject::QueuePair);
    const int held = limits.held(DeviceObject::QueuePair);
    if (limit <= 0 || needed <= limit - held) continue;
    return "its next connections may need up to " + std::to_string(needed) + " queue pairs (" +
           std::to_string(sends) + " send comms x " + std::to_string(qps) + ", " +
           std::to_string(receives) + " receive comms x " + std::to_string(qps + 1) + ") but " +
           open->name() + " has room for " + std::to_string(std::max(0, limit - held)) +
           " more (its limit " + std::to_string(limit) + ", this process holds " +
           std::to_string(held) +
           "): connects past that fail. Fewer: WEFT_IB_QPS_PER_CONNECTION, NCCL_NCHANNELS, or "
           "fewer ranks per node on this NIC";
  }
  return "";
}

}  // namespace weft::verbs
