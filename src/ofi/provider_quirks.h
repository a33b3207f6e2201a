// What weft does about particular providers' behaviour when it opens and
// closes an endpoint, each with the provider code that calls for it.
#pragma once

#include <rdma/fabric.h>
#include <rdma/fi_domain.h>

#include <string>

namespace weft::ofi {

// fi_enable failed with `rc`: on verbs;ofi_rxm, logs the likely cause (its
// completion queue sizes) and the variables that fix it.
void explain_enable_failure(const std::string& device, const fi_info* info, int rc);

// Drives rxm's progress through `cq` for a bounded time before the endpoint
// closes, dropping what it reads (see the definition for the crash it avoids).
void drain_before_close(fid_cq* cq);

}  // namespace weft::ofi
