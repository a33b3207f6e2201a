#include "core/rma_connect.h"

#include "weft/log.h"

namespace weft {

ncclResult_t decode_rma_handles(void* const* handles, int nranks, int rank,
                                const std::string& device, const RmaHandleRules& rules,
                                std::vector<ListenHandle>* out) {
  if (handles == nullptr || nranks < 1 || rank < 0 || rank >= nranks) {
    WEFT_WARN("one-sided connect on %s: rank %d of %d ranks%s", device.c_str(), rank, nranks,
              handles == nullptr ? " and no handles" : "");
    return ncclInvalidArgument;
  }
  out->assign(static_cast<size_t>(nranks), ListenHandle{});
  for (int r = 0; r < nranks; ++r) {
    ListenHandle& decoded = (*out)[static_cast<size_t>(r)];
    std::string error;
    if (handles[r] == nullptr ||
        !decode_handle(handles[r], kHandleSize, rules.transport, &decoded, &error)) {
      WEFT_WARN("one-sided connect on %s: the handle of rank %d is not usable: %s", device.c_str(),
                r, handles[r] == nullptr ? "it is NULL" : error.c_str());
      return ncclInvalidArgument;
    }
    if (decoded.fingerprint != rules.fingerprint) {
      WEFT_WARN("one-sided connect on %s: rank %d listens with %s", device.c_str(), r,
                rules.fingerprint_mismatch);
      return ncclInvalidUsage;
    }
    if (!rules.check_payload(r, decoded, &error)) {
      WEFT_WARN("one-sided connect on %s: rank %d's address: %s", device.c_str(), r, error.c_str());
      return ncclInvalidArgument;
    }
    if ((r == rank) != rules.is_own(decoded)) {
      WEFT_WARN("one-sided connect on %s: %s", device.c_str(),
                r == rank ? "this rank's own handle is not the one its listen made (handles out "
                            "of rank order?)"
                          : "another rank's handle is this rank's own listen handle");
      return ncclInvalidArgument;
    }
  }
  return ncclSuccess;
}

std::string unheard_ranks(const std::vector<bool>& heard, const std::vector<std::string>& names) {
  std::string missing;
  for (size_t r = 0; r < heard.size(); ++r) {
    if (heard[r]) continue;
    missing += (missing.empty() ? "" : ", ") + std::to_string(r) + " (" + names[r] + ")";
  }
  return missing;
}

void warn_unheard(const char* what, const std::string& device, int rank, int timeout_ms,
                  const std::string& missing) {
  WEFT_WARN(
      "one-sided %s on %s: rank %d heard nothing within %d ms (WEFT_CONNECT_TIMEOUT_MS) "
      "from rank%s %s; are they running, and do they call it too?",
      what, device.c_str(), rank, timeout_ms, missing.find(',') == std::string::npos ? "" : "s",
      missing.empty() ? "(all answered; sends unfinished)" : missing.c_str());
}

}  // namespace weft
