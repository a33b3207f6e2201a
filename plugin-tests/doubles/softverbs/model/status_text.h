// The words rdma-core uses for work completion statuses and async events.
#pragma once

#include <infiniband/verbs.h>

namespace softverbs {

const char* wc_status_text(ibv_wc_status status);
const char* event_type_text(ibv_event_type event);

}  // namespace softverbs
