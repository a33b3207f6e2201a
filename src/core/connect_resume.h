// One call of NCCL's non-blocking connect(), the same on every transport:
// decode the handle and check it was made by a matching device, find the
// comm parked under the handle's cookie (or build it on the first call,
// unless kMaxConnectsInFlight others are being set up: then a NULL comm),
// step its setup, and park it again under a cookie written into the
// caller's handle until it is connected. On failure the comm is closed and
// the cookie cleared, so a retry with the same handle starts afresh.
#pragma once

#include <memory>
#include <string>

#include "core/handle_header.h"
#include "core/pending_connects.h"
#include "weft/log.h"

namespace weft {

// check(const ListenHandle&) -> ncclResult_t: the handle's fingerprint fits
// this device (it logs why not).
// build(const ListenHandle&, std::unique_ptr<Comm>*) -> ncclResult_t.
// step(Comm&, bool* connected) -> ncclResult_t: advances the setup.
template <typename Comm, typename Check, typename Build, typename Step>
ncclResult_t resume_connect(PendingConnects<Comm>& pending, TransportId transport,
                            const std::string& device, void* handle, Check&& check, Build&& build,
                            Step&& step, SendComm** send_comm) {
  *send_comm = nullptr;
  ListenHandle decoded;
  std::string error;
  if (!decode_handle(handle, kHandleSize, transport, &decoded, &error)) {
    WEFT_WARN("connect on %s: %s", device.c_str(), error.c_str());
    return ncclInvalidArgument;
  }
  if (ncclResult_t result = check(decoded); result != ncclSuccess) return result;
  uint64_t cookie = decoded.connect_cookie;
  std::unique_ptr<Comm> comm = pending.take(cookie);
  if (!comm) {
    if (pending.full()) return ncclSuccess;  // a NULL comm: NCCL calls again
    if (ncclResult_t result = build(decoded, &comm); result != ncclSuccess) return result;
    cookie = pending.new_cookie();
  }
  bool connected = false;
  ncclResult_t result = step(*comm, &connected);
  if (result != ncclSuccess) {
    comm.release()->close();
    store_connect_cookie(handle, 0);
    return result;
  }
  if (!connected) {
    store_connect_cookie(handle, cookie);
    pending.park(cookie, std::move(comm));
    return ncclSuccess;
  }
  store_connect_cookie(handle, 0);
  *send_comm = comm.release();
  return ncclSuccess;
}

}  // namespace weft
