// The RC queue pair state machine (RESET, INIT, RTR, RTS, ERR): which
// attributes each transition takes, and what entering a state does.
#pragma once

#include <infiniband/verbs.h>

#include "queue_pair.h"

namespace softverbs {

// Applies `attr` as ibv_modify_qp does; 0 or an errno value.
int modify_qp(Qp& qp, ibv_qp_attr* attr, int mask);

}  // namespace softverbs
