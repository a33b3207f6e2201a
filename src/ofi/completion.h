// What a completion-queue entry points back to. Every operation weft posts
// carries an OpContext; the provider returns its address as op_context.
#pragma once

#include <rdma/fabric.h>

#include <cstddef>
#include <cstdint>

namespace weft::ofi {

class CompletionTarget {
 public:
  // May run on any thread that polls the endpoint's completion queue.
  // remote_data: the sender's immediate data (the message size), or nullptr.
  virtual void on_complete(uint32_t slot, size_t length, const uint64_t* remote_data) = 0;
  virtual void on_error(uint32_t slot, int error, size_t overflow_length, const char* text) = 0;

 protected:
  ~CompletionTarget() = default;
};

struct OpContext {
  fi_context2 provider_context;  // first: the provider uses this space (FI_CONTEXT2)
  CompletionTarget* target = nullptr;
  uint32_t slot = 0;
};

}  // namespace weft::ofi
