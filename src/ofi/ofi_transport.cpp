#include "ofi/ofi_transport.h"

#include <cstring>

#include "core/cuda/cuda_driver.h"
#include "core/hash.h"
#include "ofi/connection_messages.h"
#include "ofi/listen_comm.h"
#include "weft/log.h"

namespace weft::ofi {

ncclResult_t OfiTransport::create(const Params& params, std::unique_ptr<Transport>* out) {
  std::vector<DiscoveredDevice> discovered;
  ncclResult_t result = discover_devices(params, &discovered);
  if (result != ncclSuccess) return result;
  std::unique_ptr<OfiTransport> transport(new OfiTransport());
  transport->params_ = params;
  if (params.gpu != "off") transport->cuda_ = cuda::Driver::shared(params.cuda_lib);
  for (auto& found : discovered) {
    auto device = std::make_unique<Device>();
    found.properties.reg_is_global = params.mr_cache;
    found.properties.force_flush = params.force_flush;
    device->gpu = enable_gpu_memory(&found, transport->cuda_, params);
    result = choose_protocol(&found, params.ofi_protocol, &device->protocol);
    if (result != ncclSuccess) return result;
    device->provider_hash = fnv1a_32(std::string(found.info->fabric_attr->prov_name) + "/" +
                                     std::to_string(found.info->addr_format));
    WEFT_INFO(NCCL_INIT, "device %zu: %s (provider %s, %s protocol, %d Mbps%s%s)",
              transport->devices_.size(), found.properties.name.c_str(),
              found.info->fabric_attr->prov_name, protocol_name(device->protocol.protocol),
              found.properties.speed_mbps, found.properties.pci_path.empty() ? "" : ", ",
              found.properties.pci_path.c_str());
    device->discovered = std::move(found);
    transport->devices_.push_back(std::move(device));
  }
  *out = std::move(transport);
  return ncclSuccess;
}

OfiTransport::~OfiTransport() {
  // Connections that never completed: do not wait for peers that may not exist.
  pending_.abandon_all([](OfiSendComm* comm) { comm->close_within(0); });
}

bool OfiTransport::valid_device(int dev, const char* caller) const {
  if (dev >= 0 && dev < device_count()) return true;
  WEFT_WARN("%s: device %d does not exist (weft has %d)", caller, dev, device_count());
  return false;
}

ncclResult_t OfiTransport::properties(int dev, DeviceProperties* props) const {
  if (!valid_device(dev, "getProperties")) return ncclInvalidArgument;
  *props = devices_[dev]->discovered.properties;
  return ncclSuccess;
}

ncclResult_t OfiTransport::endpoint_for(int dev, std::shared_ptr<Endpoint>* out) {
  Device& device = *devices_[dev];
  std::lock_guard<std::mutex> lock(device.mutex);
  std::shared_ptr<Endpoint> endpoint = device.endpoint.lock();
  if (endpoint && endpoint->broken()) {
    // Comms still using the broken one keep it alive until they close.
    WEFT_INFO(NCCL_NET, "%s: opening a fresh endpoint after a connection failure",
              device.discovered.properties.name.c_str());
    endpoint.reset();
  }
  if (!endpoint) {
    EndpointOptions options;
    options.cq_read_count = static_cast<int>(params_.ofi_cq_read_count);
    options.cq_size = static_cast<int>(params_.ofi_cq_size);
    options.mr_cache = params_.mr_cache;
    options.mr_cache_max_entries = static_cast<int>(params_.mr_cache_max_entries);
    options.cuda = device.gpu.cuda ? cuda_ : nullptr;
    options.gpu_off_reason = device.gpu.off_reason;
    options.dmabuf = device.gpu.dmabuf;
    options.flush = device.gpu.flush;
    options.rdma = device.protocol.protocol == Protocol::Rdma;
    options.eager_size = static_cast<size_t>(params_.ofi_eager_size);
    options.eager_buffers = static_cast<int>(params_.ofi_eager_buffers);
    options.max_message = device.discovered.properties.max_p2p_bytes;
    options.reorder_window = static_cast<int>(params_.ofi_test_reorder);
    options.reorder_seed = static_cast<uint64_t>(params_.ofi_test_reorder_seed);
    ncclResult_t result = Endpoint::open(device.discovered.info.get(),
                                         device.discovered.properties.name, options, &endpoint);
    if (result != ncclSuccess) return result;
    device.endpoint = endpoint;
  }
  *out = std::move(endpoint);
  return ncclSuccess;
}

ncclResult_t OfiTransport::listen(int dev, void* handle, ListenComm** listen_comm) {
  if (!valid_device(dev, "listen")) return ncclInvalidArgument;
  std::shared_ptr<Endpoint> endpoint;
  ncclResult_t result = endpoint_for(dev, &endpoint);
  if (result != ncclSuccess) return result;
  if (endpoint->local_address_size() > kMaxAddressSize) {
    WEFT_WARN("%s: endpoint address of %zu bytes does not fit in a %zu-byte handle",
              endpoint->device_name().c_str(), endpoint->local_address_size(), kMaxAddressSize);
    return ncclInternalError;
  }
  uint32_t listen_id = endpoint->next_id();
  auto comm = std::make_unique<OfiListenComm>(endpoint, listen_id,
                                              static_cast<int>(params_.close_timeout_ms));
  result = comm->start();
  if (result != ncclSuccess) {
    comm.release()->close();
    return result;
  }
  ListenHandle encoded;
  encoded.transport = TransportId::Ofi;
  encoded.fingerprint = devices_[dev]->provider_hash;
  encoded.listen_id = listen_id;
  encoded.payload_size = static_cast<uint8_t>(endpoint->local_address_size());
  std::memcpy(encoded.payload, endpoint->local_address(), encoded.payload_size);
  encode_handle(encoded, handle);
  *listen_comm = comm.release();
  return ncclSuccess;
}

ncclResult_t OfiTransport::connect(int dev, const CommConfig&, void* handle, SendComm** send_comm) {
  *send_comm = nullptr;
  if (!valid_device(dev, "connect")) return ncclInvalidArgument;
  ListenHandle decoded;
  std::string error;
  if (!decode_handle(handle, kHandleSize, TransportId::Ofi, &decoded, &error)) {
    WEFT_WARN("connect on %s: %s", devices_[dev]->discovered.properties.name.c_str(),
              error.c_str());
    return ncclInvalidArgument;
  }
  if (decoded.fingerprint != devices_[dev]->provider_hash) {
    WEFT_WARN(
        "connect on %s: the peer listens with a different libfabric provider or address "
        "format than this device (%s); set the same WEFT_OFI_PROVIDER on every node",
        devices_[dev]->discovered.properties.name.c_str(),
        devices_[dev]->discovered.info->fabric_attr->prov_name);
    return ncclInvalidUsage;
  }

  uint64_t cookie = decoded.connect_cookie;
  std::unique_ptr<OfiSendComm> comm = pending_.take(cookie);
  if (!comm) {
    std::shared_ptr<Endpoint> endpoint;
    ncclResult_t result = endpoint_for(dev, &endpoint);
    if (result != ncclSuccess) return result;
    CommSetup setup;
    setup.endpoint = endpoint;
    setup.close_timeout_ms = static_cast<int>(params_.close_timeout_ms);
    setup.peer_name = endpoint->address_to_string(decoded.payload, decoded.payload_size);
    result = endpoint->insert_address(decoded.payload, decoded.payload_size, &setup.peer);
    if (result != ncclSuccess) return result;
    comm = std::make_unique<OfiSendComm>(std::move(setup), endpoint->next_id(), decoded.listen_id,
                                         static_cast<int>(params_.connect_timeout_ms));
    cookie = pending_.new_cookie();
  }

  bool connected = false;
  ncclResult_t result = comm->step_connect(&connected);
  if (result != ncclSuccess) {
    comm.release()->close();
    store_connect_cookie(handle, 0);
    return result;
  }
  if (connected) {
    store_connect_cookie(handle, 0);
    *send_comm = comm.release();
    return ncclSuccess;
  }
  store_connect_cookie(handle, cookie);
  pending_.park(cookie, std::move(comm));
  return ncclSuccess;
}

}  // namespace weft::ofi
