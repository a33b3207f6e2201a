#include "ofi/ofi_transport.h"
#include "weft/log.h"
#include "weft/params.h"
#include "weft/transport.h"

namespace weft {

ncclResult_t make_transport(const Params& params, std::unique_ptr<Transport>* out) {
  if (params.transport == "verbs") {
    WEFT_WARN(
        "WEFT_TRANSPORT=verbs: the native verbs transport is not part of this build yet; "
        "use WEFT_TRANSPORT=ofi (libfabric, e.g. WEFT_OFI_PROVIDER=verbs)");
    return ncclInvalidUsage;
  }
  // auto and ofi: libfabric is the only transport so far.
  return ofi::OfiTransport::create(params, out);
}

}  // namespace weft
