#include "ofi/ofi_transport.h"
#include "weft/log.h"
#include "weft/params.h"
#include "weft/transport.h"
#ifdef WEFT_HAVE_VERBS
#include "core/cuda/cuda_driver.h"
#include "verbs/port_discovery.h"
#include "verbs/verbs_transport.h"
#endif

namespace weft {

ncclResult_t make_transport(const Params& params, std::unique_ptr<Transport>* out) {
#ifdef WEFT_HAVE_VERBS
  if (params.transport == "verbs") {
    WEFT_INFO(NCCL_INIT, "candidate transport verbs [rdma-core]: used: WEFT_TRANSPORT=verbs");
    return verbs::VerbsTransport::create(params, out);
  }
  // auto: EFA through libfabric first, then native verbs on IB/RoCE ports,
  // then libfabric's other providers. A provider named explicitly means
  // libfabric.
  if (params.transport == "auto" && params.ofi_provider.empty()) {
    const cuda::Driver* cuda =
        params.gpu == "off" ? nullptr : cuda::Driver::shared(params.cuda_lib);
    verbs::DiscoveredPorts ports;
    std::string reason;
    if (!verbs::discover_ports(params, cuda, &ports, &reason)) {
      WEFT_INFO(NCCL_INIT, "candidate transport verbs [rdma-core]: not used: %s", reason.c_str());
    } else if (ports.efa_devices > 0) {
      WEFT_INFO(NCCL_INIT,
                "candidate transport verbs [rdma-core]: not used: %d EFA device(s), which "
                "libfabric drives",
                ports.efa_devices);
    } else if (!ports.ports.empty()) {
      WEFT_INFO(NCCL_INIT,
                "candidate transport verbs [rdma-core]: used: auto: %zu InfiniBand/RoCE port(s)",
                ports.ports.size());
      *out = std::make_unique<verbs::VerbsTransport>(params, std::move(ports));
      return ncclSuccess;
    } else {
      WEFT_INFO(NCCL_INIT,
                "candidate transport verbs [rdma-core]: not used: no active InfiniBand/RoCE port");
    }
  }
#else
  if (params.transport == "auto") {
    WEFT_INFO(NCCL_INIT,
              "candidate transport verbs [rdma-core]: not used: this weft was built without "
              "rdma-core's headers (libibverbs-dev)");
  }
  if (params.transport == "verbs") {
    WEFT_WARN(
        "WEFT_TRANSPORT=verbs: this weft was built without rdma-core's headers (libibverbs-dev), "
        "so without the native verbs transport; use WEFT_TRANSPORT=ofi");
    return ncclInvalidUsage;
  }
#endif
  WEFT_INFO(NCCL_INIT, "candidate transport ofi [libfabric]: used: %s",
            params.transport == "ofi"      ? "WEFT_TRANSPORT=ofi"
            : !params.ofi_provider.empty() ? "WEFT_OFI_PROVIDER names a libfabric provider"
                                           : "auto: no native verbs port");
  return ofi::OfiTransport::create(params, out);
}

}  // namespace weft
