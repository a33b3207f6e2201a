// The library as a whole: fork support and the softverbs_* controls of
// softverbs.h.

#include <infiniband/verbs.h>

#include <cstdlib>
#include <cstring>

#include "ibverbs/api.h"
#include "model/counters.h"
#include "softverbs.h"

using namespace softverbs;

SOFTVERBS_API int ibv_fork_init(void) {
  return 0;
}

// SOFTVERBS_FORK=disabled|enabled pretends an older kernel (no copy of
// pinned pages on fork); the default is a kernel that needs nothing.
SOFTVERBS_API ibv_fork_status ibv_is_fork_initialized(void) {
  const char* mode = std::getenv("SOFTVERBS_FORK");
  if (mode != nullptr && std::strcmp(mode, "disabled") == 0) return IBV_FORK_DISABLED;
  if (mode != nullptr && std::strcmp(mode, "enabled") == 0) return IBV_FORK_ENABLED;
  return IBV_FORK_UNNEEDED;
}

SOFTVERBS_API int softverbs_get_counters(softverbs_counters* out) {
  if (out == nullptr) return -1;
  read_counters(out);
  return 0;
}

SOFTVERBS_API void softverbs_reset_counters(void) {
  reset_counters();
}

SOFTVERBS_API int softverbs_present(void) {
  return 1;
}
