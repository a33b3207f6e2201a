#include "ofi/endpoint/completion_failure.h"

#include <rdma/fi_errno.h>

#include <cerrno>
#include <string>

#include "core/completion_target.h"
#include "ofi/endpoint/endpoint.h"
#include "weft/log.h"

namespace weft::ofi {

ncclResult_t completion_failure(const char* operation, Endpoint& endpoint,
                                const std::string& peer_name, int error, size_t overflow_length,
                                size_t posted_size, const char* text) {
  const char* device = endpoint.device_name().c_str();
  const char* provider = endpoint.provider_name().c_str();
  if (error != FI_ECANCELED) endpoint.mark_broken();
  if (error == kTruncated) {
    // Providers do not all report how much was cut off.
    std::string excess = overflow_length > 0 ? std::to_string(overflow_length) + " bytes " : "";
    WEFT_WARN(
        "%s from %s on %s (%s): the peer sent %smore than the %zu-byte receive posted for "
        "it (message truncated; sender and receiver disagree on sizes)",
        operation, peer_name.c_str(), device, provider, excess.c_str(), posted_size);
    return ncclInvalidUsage;
  }
  if (error == FI_ECANCELED) {
    // weft cancels only while closing a comm, and then reports nothing: a
    // cancellation that reaches test() came from the provider dropping the
    // connection (libfabric 2.x tcp does so when the peer goes away).
    WEFT_WARN(
        "%s with %s on %s (%s) was cancelled by the provider: the connection to the peer was "
        "lost (did the peer process exit or its node fail?)",
        operation, peer_name.c_str(), device, provider);
    return ncclRemoteError;
  }
  WEFT_WARN("%s with %s on %s (%s) failed: %s (%s)", operation, peer_name.c_str(), device, provider,
            fi_strerror(error), text);
  switch (error) {
    case FI_EIO:
    case FI_ECONNRESET:
    case FI_ECONNREFUSED:
    case FI_ECONNABORTED:
    case FI_ENOTCONN:
    case FI_ETIMEDOUT:
    case FI_EHOSTUNREACH:
    case FI_EREMOTEIO:
    case FI_ESHUTDOWN:
    case kPeerProtocolError:
      return ncclRemoteError;
    default:
      return ncclSystemError;
  }
}

}  // namespace weft::ofi
