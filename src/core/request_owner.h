// The comm a request belongs to, as both transports' requests see it. Each
// transport keeps its request type beside its completion queue:
// ofi/endpoint/completion_request.h (completions delivered by any thread
// polling a shared queue), verbs/polled_request.h (a queue only the comm's
// thread reads).
#pragma once

#include "weft/transport.h"

namespace weft {

// The comm a request belongs to.
class RequestOwner {
 public:
  // Drives progress (polls the completion queue, posts what is unposted);
  // once the connection failed, returns that failure.
  virtual ncclResult_t progress() = 0;
  // Hands a finished request back to the comm's pool.
  virtual void recycle(Request* request) = 0;

 protected:
  ~RequestOwner() = default;
};

}  // namespace weft
