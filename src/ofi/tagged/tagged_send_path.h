// Send side of the tagged protocol: each message is one tagged send to the
// receiver's comm id and NCCL's tag, its size as immediate data so the
// receiver can tell a truncation. Small messages are injected where the
// provider is done with an inject on return (Endpoint::may_inject): it
// copies them and reports no completion.
#pragma once

#include <cstddef>

#include "core/request_pool.h"
#include "ofi/endpoint/completion.h"
#include "ofi/endpoint/endpoint.h"
#include "ofi/endpoint/path_peer.h"

namespace weft::ofi {

class TaggedSendPath final : public CompletionOwner {
 public:
  // NCCL may keep 32 x maxRecvs sends in flight on one comm.
  static constexpr size_t kPoolSize = kMaxRequests * kMaxRecvs;

  TaggedSendPath(Endpoint& endpoint, PathPeer peer);
  TaggedSendPath(const TaggedSendPath&) = delete;
  TaggedSendPath& operator=(const TaggedSendPath&) = delete;

  ncclResult_t isend(void* data, size_t size, int tag, void* mhandle, Request** request);
  ncclResult_t progress() override;
  void recycle(Request* request) override;
  ncclResult_t report_failure(int error, size_t overflow_length, size_t posted_size,
                              const char* text) override;
  bool in_flight();
  // A tagged sender posts no receives.
  void cancel_receives() {}

 private:
  using SendRequest = OfiRequest<1, TaggedSendPath>;

  Endpoint& endpoint_;
  PathPeer peer_;
  RequestPool<SendRequest, kPoolSize> pool_;
};

}  // namespace weft::ofi
