// What a transport's completion events are delivered to. Transports keep
// their own per-operation context (libfabric's fi_context2, a verbs wr_id)
// that points back to a target and a slot.
#pragma once

#include <cerrno>
#include <cstddef>
#include <cstdint>

namespace weft {

// Completion errors are positive errno values. A transport maps its own
// codes onto these (libfabric's FI_ETRUNC becomes kTruncated).
constexpr int kTruncated = EMSGSIZE;
// The peer sent what the protocol does not allow.
constexpr int kPeerProtocolError = EPROTO;

class CompletionTarget {
 public:
  // May run on any thread that polls the transport's completion queue.
  // remote_data: the sender's immediate data (its message size), or nullptr.
  virtual void on_complete(uint32_t slot, size_t length, const uint64_t* remote_data) = 0;
  virtual void on_error(uint32_t slot, int error, size_t overflow_length, const char* text) = 0;

 protected:
  ~CompletionTarget() = default;
};

}  // namespace weft
