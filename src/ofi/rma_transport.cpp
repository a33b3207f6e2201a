// The libfabric transport's one-sided table (OneSidedTransport): each
// device's first rail, asked again for FI_RMA and FI_ATOMIC, over an
// endpoint of its own.
#include <cstring>

#include "core/handle_header.h"
#include "core/listen_secret.h"
#include "core/rma_connect.h"
#include "ofi/discovery/provider_discovery.h"
#include "ofi/ofi_transport.h"
#include "ofi/one_sided/rma_comm.h"
#include "ofi/wire/connection_messages.h"
#include "weft/log.h"

namespace weft::ofi {

const fi_info* OfiTransport::rma_info(Rail& rail, std::string* why) const {
  std::lock_guard<std::mutex> lock(rma_mutex_);
  if (!rail.rma_probed) {
    rail.rma_probed = true;
    constexpr uint64_t kCaps = FI_RMA | FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE;
    const fi_info* base = rail.discovered.info.get();
    // Where writes and atomics are kept in order a signal needs no
    // delivery-complete round trip behind the data (core/rma_block.h); without
    // atomics, signals travel as messages (rma_signal_inbox.h).
    rail.rma_info = find_variant(base, kCaps | FI_ATOMIC, 0, FI_ORDER_WAW);
    rail.rma_ordered = rail.rma_info != nullptr;
    if (!rail.rma_info) rail.rma_info = find_variant(base, kCaps | FI_ATOMIC, 0);
    rail.rma_atomics = rail.rma_info != nullptr;
    if (!rail.rma_info) rail.rma_info = find_variant(base, kCaps, 0);
    if (!rail.rma_info) {
      rail.rma_off_reason = std::string("provider ") + base->fabric_attr->prov_name +
                            " offers no remote reads and writes (FI_RMA) on " +
                            rail.discovered.properties.name;
    }
  }
  if (!rail.rma_info) *why = rail.rma_off_reason;
  return rail.rma_info.get();
}

bool OfiTransport::rma_supported(int dev, std::string* why) const {
  Device device;
  if (!device_of(dev, "one-sided devices", &device)) {
    *why = "no device " + std::to_string(dev);
    return false;
  }
  return rma_info(first_rail(device), why) != nullptr;
}

ncclResult_t OfiTransport::rma_endpoint_for(int rail, std::shared_ptr<Endpoint>* out) {
  Rail& device = *rails_[rail];
  std::string why;
  const fi_info* info = rma_info(device, &why);
  if (info == nullptr) {
    WEFT_WARN("one-sided listen: %s", why.c_str());
    return ncclInvalidUsage;
  }
  auto usable = [](const Endpoint& endpoint) { return !endpoint.broken(); };
  auto open = [&](std::shared_ptr<Endpoint>* endpoint) {
    EndpointOptions options = endpoint_options(device);
    options.rdma = false;
    options.weft_matching = false;
    options.one_sided = true;
    options.one_sided_ordered = device.rma_ordered;
    ncclResult_t result =
        Endpoint::open(info, device.discovered.properties.name, options, endpoint);
    if (result != ncclSuccess) return result;
    std::string refusal;
    std::lock_guard<std::mutex> lock(rma_mutex_);
    if (device.rma_atomics && !(*endpoint)->atomic_add_supported(&refusal)) {
      WEFT_INFO(NCCL_NET, "%s: %s: signals travel as messages",
                device.discovered.properties.name.c_str(), refusal.c_str());
      device.rma_atomics = false;
    }
    return ncclSuccess;
  };
  return device.rma_endpoint.get(usable, open, out);
}

ncclResult_t OfiTransport::rma_listen(int dev, void* handle, RmaListenComm** listen) {
  *listen = nullptr;
  Device device;
  if (!device_of(dev, "one-sided listen", &device)) return ncclInvalidArgument;
  std::shared_ptr<Endpoint> endpoint;
  ncclResult_t result = rma_endpoint_for(device.rails[0], &endpoint);
  if (result != ncclSuccess) return result;
  if (endpoint->local_address_size() > kMaxAddressSize) {
    WEFT_WARN("%s: endpoint address of %zu bytes does not fit in a %zu-byte handle",
              endpoint->device_name().c_str(), endpoint->local_address_size(), kMaxAddressSize);
    return ncclInternalError;
  }
  ListenHandle encoded;
  if (!fresh_listen_secret(&encoded.secret)) return ncclSystemError;
  encoded.transport = TransportId::OfiRma;
  encoded.fingerprint = first_rail(device).provider_hash;
  encoded.listen_id = endpoint->next_id();
  encoded.payload_size = static_cast<uint8_t>(endpoint->local_address_size());
  std::memcpy(encoded.payload, endpoint->local_address(), encoded.payload_size);
  encode_handle(encoded, handle);
  auto* made =
      new OfiRmaListenComm(endpoint, encoded.listen_id, encoded.secret, encoded.fingerprint);
  std::lock_guard<std::mutex> lock(rma_mutex_);
  made->message_signals = !first_rail(device).rma_atomics || params_.ofi_test_message_signals;
  *listen = made;
  return ncclSuccess;
}

ncclResult_t OfiTransport::rma_connect(void* const* handles, int nranks, int rank,
                                       RmaListenComm* listen, RmaComm** comm) {
  return connect_rma_comm<OfiRmaComm, OfiRmaListenComm>(
      handles, nranks, rank, listen, static_cast<int>(params_.connect_timeout_ms), comm);
}

}  // namespace weft::ofi
