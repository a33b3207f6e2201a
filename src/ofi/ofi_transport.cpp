#include "ofi/ofi_transport.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "core/connect_resume.h"
#include "core/cuda/cuda_driver.h"
#include "core/device_limit_log.h"
#include "core/line_order_guard.h"
#include "core/listen_secret.h"
#include "core/tcp_channel.h"
#include "ofi/comm/listen_comm.h"
#include "ofi/discovery/hash.h"
#include "ofi/discovery/rail_grouping.h"
#include "ofi/endpoint/efa_settings.h"
#include "ofi/fabric/provider_quirks.h"
#include "ofi/one_sided/rma_comm.h"
#include "ofi/wire/connection_messages.h"
#include "weft/log.h"

namespace weft::ofi {

namespace {

RailGrouping grouping_of(const std::string& setting) {
  if (setting == "off") return RailGrouping::Off;
  if (setting == "all") return RailGrouping::All;
  return RailGrouping::Pci;
}

}  // namespace

// The answers an EFA endpoint gives to weft's settings, found at init on a
// scratch endpoint: they decide the device's pointer support and protocol
// that NCCL is told, and NCCL_PROTO before NCCL reads it.
ncclResult_t OfiTransport::settle_efa_settings(DiscoveredDevice* found, Rail* rail) {
  const std::string& name = found->properties.name;
  EfaWanted wanted;
  wanted.gpu = rail->gpu.cuda;
  wanted.rdma = rail->protocol.protocol == Protocol::Rdma;
  EfaOutcome outcome;
  std::string error;
  if (!probe_efa_settings(found->info.get(), wanted, name, &outcome, &error)) {
    WEFT_WARN("%s: opening a scratch endpoint to set the EFA options failed: %s", name.c_str(),
              error.c_str());
    return ncclSystemError;
  }
  if (wanted.rdma && !outcome.writes_native) {
    if (params_.ofi_protocol == "rdma") {
      WEFT_WARN("%s: WEFT_OFI_PROTOCOL=rdma, but %s; use WEFT_OFI_PROTOCOL=tagged or auto",
                name.c_str(), outcome.writes_reason.c_str());
      return ncclInvalidUsage;
    }
    if ((found->info->caps & FI_TAGGED) == 0) {
      // The message variant: back to the provider's tagged fabric.
      InfoPtr tagged = find_variant(found->info.get(), found->info->caps & FI_HMEM,
                                    found->info->domain_attr->mr_mode & FI_MR_HMEM);
      if (!tagged) {
        WEFT_WARN("%s: %s, and fabric %s has no tagged messages for the tagged protocol",
                  name.c_str(), outcome.writes_reason.c_str(), found->info->fabric_attr->name);
        return ncclSystemError;
      }
      found->info = std::move(tagged);
    }
    rail->protocol.protocol = Protocol::Tagged;
    rail->protocol.weft_matching = false;
    rail->protocol.reason = outcome.writes_reason;
    WEFT_INFO(NCCL_INIT | NCCL_NET, "%s: tagged protocol (%s)", name.c_str(),
              outcome.writes_reason.c_str());
    // The tagged protocol's own in-order option decides the line order.
    wanted.rdma = false;
    if (!probe_efa_settings(found->info.get(), wanted, name, &outcome, &error)) {
      WEFT_WARN("%s: opening a scratch endpoint to set the EFA options failed: %s", name.c_str(),
                error.c_str());
      return ncclSystemError;
    }
  }
  if (wanted.gpu && !outcome.gpu) {
    rail->gpu = GpuSupport{};
    rail->gpu.off_reason = outcome.gpu_refusal;
    found->properties.ptr_support = NCCL_PTR_HOST;
    WEFT_WARN("%s: host memory only: %s", name.c_str(), outcome.gpu_refusal.c_str());
  }
  return LineOrderGuard::process().report(
      name, outcome.ordered_128,
      outcome.order_refusal + ": aligned 128-byte lines may arrive out of order");
}

AutoChoice OfiTransport::auto_choice(const Params& params) {
  AutoChoice choice;
  choice.use = true;
  choice.reason = params.ofi_provider.empty() ? "auto: no native verbs port"
                                              : "WEFT_OFI_PROVIDER names a libfabric provider";
  return choice;
}

ncclResult_t OfiTransport::create(const Params& params, std::unique_ptr<Transport>* out) {
  // Before libfabric's first fi_getinfo, where the efa provider reads it:
  // NCCL and applications fork, and registered pages must survive that.
  if (params.ofi_provider.empty() || is_efa_provider(params.ofi_provider)) {
    ::setenv("FI_EFA_FORK_SAFE", "1", 0);
  }
  send_nothing_from_staging(params.ofi_provider);
  WireMutation mutation = WireMutation::kNone;
  if (!parse_wire_mutation(params.ofi_test_hostile, &mutation)) {
    WEFT_WARN("WEFT_OFI_TEST_HOSTILE=%s names no field (known: %s)",
              params.ofi_test_hostile.c_str(), wire_mutation_names().c_str());
    return ncclInvalidArgument;
  }
  if (mutation != WireMutation::kNone) {
    WEFT_WARN(
        "WEFT_OFI_TEST_HOSTILE=%s: this process changes what it sends (a test aid); "
        "its peers will fail their connections with it",
        params.ofi_test_hostile.c_str());
  }
  std::vector<DiscoveredDevice> discovered;
  ncclResult_t result = discover_devices(params, &discovered);
  if (result != ncclSuccess) return result;
  std::unique_ptr<OfiTransport> transport(new OfiTransport());
  transport->params_ = params;
  transport->wire_mutation_ = mutation;
  if (params.gpu != "off") transport->cuda_ = cuda::Driver::shared(params.cuda_lib);
  std::vector<RailCandidate> candidates;
  for (auto& found : discovered) {
    auto rail = std::make_unique<Rail>();
    found.properties.reg_is_global = params.mr_cache;
    found.properties.force_flush = params.force_flush;
    rail->gpu = enable_gpu_memory(&found, transport->cuda_, params);
    result = choose_protocol(&found, params.ofi_protocol, params.ofi_tag_matching, &rail->protocol);
    if (result != ncclSuccess) return result;
    avoid_segmented_truncation(found.properties.name, found.info->fabric_attr->prov_name,
                               rail->protocol.protocol == Protocol::Tagged);
    if (is_efa_provider(found.info->fabric_attr->prov_name)) {
      result = transport->settle_efa_settings(&found, rail.get());
      if (result != ncclSuccess) return result;
    }
    // Both sides must match control messages the same way: weft's compact
    // tags never meet the provider's.
    rail->provider_hash = fnv1a_32(std::string(found.info->fabric_attr->prov_name) + "/" +
                                   std::to_string(found.info->addr_format) +
                                   (rail->protocol.weft_matching ? "/weft-matching" : ""));
    WEFT_INFO(NCCL_INIT, "NIC %zu: %s (provider %s, fabric %s, %s protocol, %d Mbps%s%s)",
              transport->rails_.size(), found.properties.name.c_str(),
              found.info->fabric_attr->prov_name,
              found.info->fabric_attr->name != nullptr ? found.info->fabric_attr->name : "?",
              protocol_name(rail->protocol.protocol), found.properties.speed_mbps,
              found.properties.pci_path.empty() ? "" : ", ", found.properties.pci_path.c_str());
    log_memory_region_limit(found.properties.name,
                            found.info->domain_attr->mr_cnt == 0
                                ? -1
                                : static_cast<long long>(found.info->domain_attr->mr_cnt),
                            "libfabric domain mr_cnt; the provider's own buffers count too");
    // Rails of one device must agree on the provider and the protocol.
    candidates.push_back(
        {std::to_string(rail->provider_hash) + "/" + protocol_name(rail->protocol.protocol),
         found.properties.pci_path});
    rail->discovered = std::move(found);
    transport->rails_.push_back(std::move(rail));
  }
  std::vector<std::vector<int>> groups =
      group_rails(candidates, grouping_of(params.rail_grouping), kMaxRails);
  for (size_t g = 0; g < groups.size(); ++g) {
    Device device;
    device.rails = groups[g];
    device.properties = transport->combined_properties(device.rails);
    // v12: NICs of one PCI group are planes of one rail.
    device.properties.rail_id = static_cast<int>(g);
    device.properties.plane_id = device.rails.size() == 1 ? 0 : -1;
    transport->add_device(std::move(device));
  }
  *out = std::move(transport);
  return ncclSuccess;
}

DeviceProperties OfiTransport::combined_properties(const std::vector<int>& rails) const {
  DeviceProperties props = rails_[rails[0]]->discovered.properties;
  if (rails.size() == 1) return props;
  bool rdma = rails_[rails[0]]->protocol.protocol == Protocol::Rdma;
  for (size_t i = 1; i < rails.size(); ++i) {
    const DeviceProperties& other = rails_[rails[i]]->discovered.properties;
    props.name += "+" + other.name;
    props.ptr_support &= other.ptr_support;
    // Only the rdma protocol spreads data over rails; tagged uses the first.
    if (rdma) props.speed_mbps += other.speed_mbps;
    props.latency_us = std::max(props.latency_us, other.latency_us);
    props.max_comms = std::min(props.max_comms, other.max_comms);
    props.max_p2p_bytes = std::min(props.max_p2p_bytes, other.max_p2p_bytes);
  }
  return props;
}

void OfiTransport::add_device(Device device) {
  std::lock_guard<std::mutex> lock(devices_mutex_);
  const Rail& rail = *rails_[device.rails[0]];
  std::string names;
  for (int r : device.rails) names += (names.empty() ? "" : ", ") + std::to_string(r);
  if (device.rails.size() > 1 && rail.protocol.protocol != Protocol::Rdma) {
    WEFT_WARN(
        "device %zu (%s) spans NICs %s, but the tagged protocol carries data on the first only; "
        "set WEFT_OFI_PROTOCOL=rdma to use them all, or WEFT_RAIL_GROUPING=off",
        devices_.size(), device.properties.name.c_str(), names.c_str());
  }
  WEFT_INFO(NCCL_INIT, "device %zu: %s over NIC%s %s (%s protocol, %d Mbps)", devices_.size(),
            device.properties.name.c_str(), device.rails.size() > 1 ? "s" : "", names.c_str(),
            protocol_name(rail.protocol.protocol), device.properties.speed_mbps);
  devices_.push_back(std::move(device));
}

OfiTransport::~OfiTransport() {
  // Connections that never completed: do not wait for peers that may not exist.
  pending_.abandon_all([](OfiSendComm* comm) { comm->close_within(0); });
}

int OfiTransport::device_count() const {
  std::lock_guard<std::mutex> lock(devices_mutex_);
  return static_cast<int>(devices_.size());
}

bool OfiTransport::device_of(int dev, const char* caller, Device* out) const {
  std::lock_guard<std::mutex> lock(devices_mutex_);
  if (dev >= 0 && dev < static_cast<int>(devices_.size())) {
    *out = devices_[static_cast<size_t>(dev)];
    return true;
  }
  WEFT_WARN("%s: device %d does not exist (weft has %zu)", caller, dev, devices_.size());
  return false;
}

ncclResult_t OfiTransport::properties(int dev, DeviceProperties* props) const {
  Device device;
  if (!device_of(dev, "getProperties", &device)) return ncclInvalidArgument;
  *props = device.properties;
  return ncclSuccess;
}

ncclResult_t OfiTransport::make_virtual_device(const std::vector<int>& devs, int* dev) {
  *dev = -1;
  if (devs.empty()) {
    WEFT_WARN("makeVDevice: no devices given");
    return ncclInvalidArgument;
  }
  Device merged;
  int rail_id = -1;
  for (int d : devs) {
    Device part;
    if (!device_of(d, "makeVDevice", &part)) return ncclInvalidArgument;
    if (rail_id < 0) rail_id = part.properties.rail_id;
    for (int rail : part.rails) {
      for (int seen : merged.rails) {
        if (seen == rail) {
          WEFT_WARN("makeVDevice: NIC %s appears twice among devices to merge",
                    rails_[rail]->discovered.properties.name.c_str());
          return ncclInvalidArgument;
        }
      }
      merged.rails.push_back(rail);
    }
  }
  if (merged.rails.size() > static_cast<size_t>(kMaxRails)) {
    WEFT_WARN("makeVDevice: %zu NICs in one device, weft supports at most %d", merged.rails.size(),
              kMaxRails);
    return ncclInvalidArgument;
  }
  const Rail& first = *rails_[merged.rails[0]];
  for (int rail : merged.rails) {
    const Rail& other = *rails_[rail];
    if (other.provider_hash != first.provider_hash ||
        other.protocol.protocol != first.protocol.protocol) {
      WEFT_WARN(
          "makeVDevice: %s (%s, %s protocol) and %s (%s, %s protocol) cannot form one device: "
          "their provider or protocol differ",
          first.discovered.properties.name.c_str(), first.discovered.info->fabric_attr->prov_name,
          protocol_name(first.protocol.protocol), other.discovered.properties.name.c_str(),
          other.discovered.info->fabric_attr->prov_name, protocol_name(other.protocol.protocol));
      return ncclInvalidUsage;
    }
  }
  merged.properties = combined_properties(merged.rails);
  merged.properties.virtual_of = devs;
  merged.properties.rail_id = rail_id;
  merged.properties.plane_id = -1;
  add_device(std::move(merged));
  *dev = device_count() - 1;
  return ncclSuccess;
}

ncclResult_t OfiTransport::rail_endpoints(const Device& device,
                                          std::vector<std::shared_ptr<Endpoint>>* out) {
  out->clear();
  // The tagged protocol moves data on the first rail only.
  size_t used = first_rail(device).protocol.protocol == Protocol::Rdma ? device.rails.size() : 1;
  for (size_t i = 0; i < used; ++i) {
    std::shared_ptr<Endpoint> endpoint;
    ncclResult_t result = endpoint_for(device.rails[i], &endpoint);
    if (result != ncclSuccess) return result;
    out->push_back(std::move(endpoint));
  }
  return ncclSuccess;
}

ncclResult_t OfiTransport::endpoint_for(int rail, std::shared_ptr<Endpoint>* out) {
  Rail& device = *rails_[rail];
  auto usable = [&](const Endpoint& endpoint) {
    if (!endpoint.broken()) return true;
    WEFT_INFO(NCCL_NET, "%s: opening a fresh endpoint after a connection failure",
              device.discovered.properties.name.c_str());
    return false;
  };
  auto open = [&](std::shared_ptr<Endpoint>* endpoint) {
    return Endpoint::open(device.discovered.info.get(), device.discovered.properties.name,
                          endpoint_options(device), endpoint);
  };
  return device.endpoint.get(usable, open, out);
}

EndpointOptions OfiTransport::endpoint_options(const Rail& device) const {
  EndpointOptions options;
  options.cq_read_count = static_cast<int>(params_.ofi_cq_read_count);
  options.cq_size = static_cast<int>(params_.ofi_cq_size);
  options.domain.mr_cache = params_.mr_cache;
  options.domain.mr_cache_max_entries = static_cast<int>(params_.mr_cache_max_entries);
  options.domain.cuda = device.gpu.cuda ? cuda_ : nullptr;
  options.domain.gpu_off_reason = device.gpu.off_reason;
  options.domain.dmabuf = device.gpu.dmabuf;
  options.domain.flush = device.gpu.flush;
  options.rdma = device.protocol.protocol == Protocol::Rdma;
  options.weft_matching = options.rdma && device.protocol.weft_matching;
  options.eager_size = static_cast<size_t>(params_.ofi_eager_size);
  options.eager_buffers = static_cast<int>(params_.ofi_eager_buffers);
  options.control_sends = static_cast<int>(params_.ofi_control_sends);
  options.max_message = device.discovered.properties.max_p2p_bytes;
  options.test_aids.reorder_window = static_cast<int>(params_.ofi_test_reorder);
  options.test_aids.reorder_seed = static_cast<uint64_t>(params_.ofi_test_reorder_seed);
  options.test_aids.hold_injects = params_.ofi_test_hold_injects;
  options.test_aids.wire_mutation = wire_mutation_;
  return options;
}

std::shared_ptr<PeerLinks> OfiTransport::peer_links() {
  return shared_peer_links(&links_, params_.socket_ifname,
                           static_cast<int>(params_.peer_timeout_ms), &links_refused_);
}

ncclResult_t OfiTransport::listen(int dev, void* handle, ListenComm** listen_comm) {
  Device device;
  if (!device_of(dev, "listen", &device)) return ncclInvalidArgument;
  std::vector<std::shared_ptr<Endpoint>> endpoints;
  ncclResult_t result = rail_endpoints(device, &endpoints);
  if (result != ncclSuccess) return result;
  std::shared_ptr<Endpoint> endpoint = endpoints[0];
  if (endpoint->local_address_size() > kMaxListenAddress) {
    WEFT_WARN("%s: endpoint address of %zu bytes does not fit in a handle (at most %zu)",
              endpoint->device_name().c_str(), endpoint->local_address_size(), kMaxListenAddress);
    return ncclInternalError;
  }
  uint64_t secret = 0;
  if (!fresh_listen_secret(&secret)) return ncclSystemError;
  uint32_t listen_id = endpoint->next_id();
  ListenSetup setup;
  setup.extra_rails.assign(endpoints.begin() + 1, endpoints.end());
  setup.close_timeout_ms = static_cast<int>(params_.close_timeout_ms);
  setup.min_stripe = static_cast<size_t>(params_.min_stripe_size);
  const std::shared_ptr<PeerLinks> links = peer_links();
  setup.links = links;
  auto comm = std::make_unique<OfiListenComm>(endpoint, listen_id, secret, std::move(setup));
  result = comm->start();
  if (result != ncclSuccess) {
    comm.release()->close();
    return result;
  }
  ListenHandle encoded;
  encoded.transport = TransportId::Ofi;
  encoded.fingerprint = first_rail(device).provider_hash;
  encoded.listen_id = listen_id;
  encoded.secret = secret;
  ListenPayload payload;
  payload.address_size = static_cast<uint8_t>(endpoint->local_address_size());
  std::memcpy(payload.address, endpoint->local_address(), payload.address_size);
  if (links) payload.process = links->identity();
  encoded.payload_size = static_cast<uint8_t>(encode_listen_payload(payload, encoded.payload));
  encode_handle(encoded, handle);
  *listen_comm = comm.release();
  return ncclSuccess;
}

ncclResult_t OfiTransport::connect(int dev, const CommConfig&, void* handle, SendComm** send_comm) {
  *send_comm = nullptr;
  Device device;
  if (!device_of(dev, "connect", &device)) return ncclInvalidArgument;
  const Rail& rail = first_rail(device);
  auto check = [&](const ListenHandle& decoded) {
    if (decoded.fingerprint == rail.provider_hash) return ncclSuccess;
    WEFT_WARN(
        "connect on %s: the peer listens with a different libfabric provider or address "
        "format than this device (%s); set the same WEFT_OFI_PROVIDER on every node",
        device.properties.name.c_str(), rail.discovered.info->fabric_attr->prov_name);
    return ncclInvalidUsage;
  };
  auto build = [&](const ListenHandle& decoded, std::unique_ptr<OfiSendComm>* out) {
    std::vector<std::shared_ptr<Endpoint>> endpoints;
    ncclResult_t result = rail_endpoints(device, &endpoints);
    if (result != ncclSuccess) return result;
    std::shared_ptr<Endpoint> endpoint = endpoints[0];
    CommSetup setup;
    setup.endpoint = endpoint;
    setup.close_timeout_ms = static_cast<int>(params_.close_timeout_ms);
    setup.min_stripe = static_cast<size_t>(params_.min_stripe_size);
    setup.links = peer_links();
    // A rail that died idle fails the comm as soon as a silent peer host does.
    if (params_.peer_timeout_ms > 0) {
      setup.rail_probe_deadline =
          std::chrono::milliseconds(std::max<int64_t>(params_.peer_timeout_ms, kMinSilenceMs));
    }
    for (size_t r = 1; r < endpoints.size(); ++r) setup.extra_rails.push_back({endpoints[r]});
    ListenPayload payload;
    std::string problem;
    if (!decode_listen_payload(decoded.payload, decoded.payload_size, &payload, &problem)) {
      WEFT_WARN("connect on %s: %s", device.properties.name.c_str(), problem.c_str());
      return ncclInvalidArgument;
    }
    setup.peer_name = endpoint->address_to_string(payload.address, payload.address_size);
    result = endpoint->insert_address(payload.address, payload.address_size, &setup.peer);
    if (result != ncclSuccess) return result;
    *out = std::make_unique<OfiSendComm>(std::move(setup), endpoint->next_id(), decoded.listen_id,
                                         decoded.secret, payload.process,
                                         static_cast<int>(params_.connect_timeout_ms));
    return ncclSuccess;
  };
  auto step = [](OfiSendComm& comm, bool* connected) { return comm.step_connect(connected); };
  return resume_connect(pending_, TransportId::Ofi, device.properties.name, handle, check, build,
                        step, send_comm);
}

}  // namespace weft::ofi
