// The verbs transport's one-sided table (OneSidedTransport): every port; a
// listen comm has a TCP listener of its own for the ranks to find each
// other (rma_comm.h).
#include "core/comm_id.h"
#include "core/handle_header.h"
#include "core/listen_secret.h"
#include "core/rma_connect.h"
#include "verbs/rma_comm.h"
#include "verbs/verbs_transport.h"
#include "weft/log.h"

namespace weft::verbs {

bool VerbsTransport::rma_supported(int dev, std::string* why) const {
  if (dev < 0 || dev >= device_count()) {
    *why = "no device " + std::to_string(dev);
    return false;
  }
  return true;
}

ncclResult_t VerbsTransport::rma_listen(int dev, void* handle, RmaListenComm** listen) {
  *listen = nullptr;
  std::shared_ptr<OpenPort> port;
  if (ncclResult_t result = port_for(dev, "one-sided listen", &port); result != ncclSuccess) {
    return result;
  }
  SocketAddress local;
  std::string ifname;
  std::string error;
  if (!side_channel_address(&local, &ifname, &error)) {
    WEFT_WARN("%s: no interface for the one-sided side channel: %s", port->name().c_str(),
              error.c_str());
    return ncclSystemError;
  }
  auto made = std::make_unique<VerbsRmaListenComm>();
  made->listener = TcpListener::open(local, &error);
  if (!made->listener) {
    WEFT_WARN("%s: cannot listen on %s: %s", port->name().c_str(), local.text().c_str(),
              error.c_str());
    return ncclSystemError;
  }
  if (!fresh_listen_secret(&made->secret)) return ncclSystemError;
  made->id = next_listen_id_.fetch_add(1) & kMaxCommId;
  if (made->id == 0) made->id = next_listen_id_.fetch_add(1) & kMaxCommId;
  made->fingerprint = fingerprint(dev);
  made->settings = qp_settings(nullptr);
  made->message_signals = port->device_attr().atomic_cap == IBV_ATOMIC_NONE;
  ListenHandle encoded;
  encoded.transport = TransportId::VerbsRma;
  encoded.fingerprint = made->fingerprint;
  encoded.listen_id = made->id;
  encoded.secret = made->secret;
  encoded.payload_size = static_cast<uint8_t>(SocketAddress::kPackedSize);
  made->listener->address().pack(encoded.payload);
  encode_handle(encoded, handle);
  WEFT_INFO(NCCL_NET, "%s: one-sided listener %u on %s (%s), signals by %s", port->name().c_str(),
            made->id, made->listener->address().text().c_str(), ifname.c_str(),
            made->message_signals ? "message (no atomics)" : "fetch-and-add");
  made->port = std::move(port);
  *listen = made.release();
  return ncclSuccess;
}

ncclResult_t VerbsTransport::rma_connect(void* const* handles, int nranks, int rank,
                                         RmaListenComm* listen, RmaComm** comm) {
  return connect_rma_comm<VerbsRmaComm, VerbsRmaListenComm>(
      handles, nranks, rank, listen, static_cast<int>(params_.connect_timeout_ms), comm);
}

}  // namespace weft::verbs
