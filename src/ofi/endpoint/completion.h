// What a completion-queue entry points back to. Every operation weft posts
// carries an OpContext; the provider returns its address as op_context.
#pragma once

#include <rdma/fabric.h>

#include <cstdint>

#include "core/completion_target.h"
#include "ofi/endpoint/completion_request.h"

namespace weft::ofi {

struct OpContext {
  fi_context2 provider_context;  // first: the provider uses this space (FI_CONTEXT2)
  CompletionTarget* target = nullptr;
  uint32_t slot = 0;
  // Where weft's matcher keeps it while posted there (message_matcher.h).
  int32_t matcher_index = -1;
};

template <int MaxOps, typename Owner>
using OfiRequest = CompletionRequest<MaxOps, OpContext, Owner>;

}  // namespace weft::ofi
