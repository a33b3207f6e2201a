#include "abi/transport_table.h"

#include "ofi/ofi_transport.h"
#include "weft/log.h"
#ifdef WEFT_HAVE_VERBS
#include "verbs/verbs_transport.h"
#endif

namespace weft {
namespace {

// Auto's order: verbs first (it declines EFA devices and a named libfabric
// provider), then libfabric, which takes whatever is left.
constexpr TransportEntry kTransports[] = {
    {"verbs", "rdma-core", TransportId::Verbs, TransportId::VerbsRma,
#ifdef WEFT_HAVE_VERBS
     verbs::VerbsTransport::auto_choice, verbs::VerbsTransport::create,
#else
     nullptr, nullptr,
#endif
     "this weft was built without rdma-core's headers (libibverbs-dev)"},
    {"ofi", "libfabric", TransportId::Ofi, TransportId::OfiRma, ofi::OfiTransport::auto_choice,
     ofi::OfiTransport::create, ""},
};

}  // namespace

std::span<const TransportEntry> transport_table() {
  return kTransports;
}

ncclResult_t make_transport(const Params& params, std::unique_ptr<Transport>* out) {
  for (const TransportEntry& entry : kTransports) {
    if (params.transport != entry.name) continue;
    if (entry.create == nullptr) {
      WEFT_WARN("WEFT_TRANSPORT=%s: %s, so without the %s transport; use WEFT_TRANSPORT=ofi",
                entry.name, entry.not_built, entry.name);
      return ncclInvalidUsage;
    }
    WEFT_INFO(NCCL_INIT, "candidate transport %s [%s]: used: WEFT_TRANSPORT=%s", entry.name,
              entry.library, entry.name);
    return entry.create(params, out);
  }
  // auto (the parameter table admits no other value).
  for (const TransportEntry& entry : kTransports) {
    if (entry.auto_choice == nullptr) {
      WEFT_INFO(NCCL_INIT, "candidate transport %s [%s]: not used: %s", entry.name, entry.library,
                entry.not_built);
      continue;
    }
    AutoChoice choice = entry.auto_choice(params);
    WEFT_INFO(NCCL_INIT, "candidate transport %s [%s]: %s: %s", entry.name, entry.library,
              choice.use ? "used" : "not used", choice.reason.c_str());
    if (!choice.use) continue;
    if (choice.opened) {
      *out = std::move(choice.opened);
      return ncclSuccess;
    }
    return entry.create(params, out);
  }
  WEFT_WARN("WEFT_TRANSPORT=auto: no transport of this weft can run here");
  return ncclInternalError;
}

}  // namespace weft
