// The words rdma-core uses for work completion statuses and async events.

#include "status_text.h"

#include <cstddef>
#include <iterator>

namespace softverbs {

namespace {

constexpr const char* kWcStatusText[] = {
    "success",
    "local length error",
    "local QP operation error",
    "local EE context operation error",
    "local protection error",
    "Work Request Flushed Error",
    "memory bind operation error",
    "bad response error",
    "local access error",
    "remote invalid request error",
    "remote access error",
    "remote operation error",
    "transport retry counter exceeded",
    "RNR retry counter exceeded",
    "local RDD violation error",
    "remote invalid RD request",
    "operation aborted",
    "invalid EE context number",
    "invalid EE context state",
    "fatal error",
    "response timeout error",
    "general error",
    "tag matching error",
    "tag matching rendezvous incomplete",
};

constexpr const char* kEventText[] = {
    "CQ error",
    "local work queue catastrophic error",
    "invalid request local work queue error",
    "local access violation work queue error",
    "communication established",
    "send queue drained",
    "path migrated",
    "path migration request error",
    "local catastrophic error",
    "port active",
    "port error",
    "LID change",
    "P_Key change",
    "SM change",
    "SRQ catastrophic error",
    "SRQ limit reached",
    "last WQE reached",
    "client reregistration",
    "GID table change",
    "WQ fatal",
};

}  // namespace

const char* wc_status_text(ibv_wc_status status) {
  if (status < 0 || static_cast<size_t>(status) >= std::size(kWcStatusText)) return "unknown";
  return kWcStatusText[status];
}

const char* event_type_text(ibv_event_type event) {
  if (event < 0 || static_cast<size_t>(event) >= std::size(kEventText)) return "unknown";
  return kEventText[event];
}

}  // namespace softverbs
