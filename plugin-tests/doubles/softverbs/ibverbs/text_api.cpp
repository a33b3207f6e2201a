// The words for statuses, events, port states and node types.

#include <infiniband/verbs.h>

#include <cstddef>
#include <iterator>

#include "ibverbs/api.h"
#include "model/status_text.h"

using namespace softverbs;

SOFTVERBS_API const char* ibv_wc_status_str(ibv_wc_status status) {
  return wc_status_text(status);
}

SOFTVERBS_API const char* ibv_event_type_str(ibv_event_type event) {
  return event_type_text(event);
}

SOFTVERBS_API const char* ibv_port_state_str(ibv_port_state state) {
  static const char* kText[] = {"PORT_NOP",   "PORT_DOWN",   "PORT_INIT",
                                "PORT_ARMED", "PORT_ACTIVE", "PORT_ACTIVE_DEFER"};
  if (state < 0 || static_cast<size_t>(state) >= std::size(kText)) return "invalid state";
  return kText[state];
}

SOFTVERBS_API const char* ibv_node_type_str(ibv_node_type type) {
  switch (type) {
    case IBV_NODE_CA:
      return "InfiniBand channel adapter";
    case IBV_NODE_SWITCH:
      return "InfiniBand switch";
    case IBV_NODE_ROUTER:
      return "InfiniBand router";
    case IBV_NODE_RNIC:
      return "iWARP NIC";
    default:
      return "unknown";
  }
}
