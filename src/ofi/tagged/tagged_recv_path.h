// Receive side of the tagged protocol: each buffer of a grouped receive is
// one tagged receive for the comm's id and NCCL's tag. A group the provider
// took only in part (EAGAIN) is finished by later progress, before any
// newer receive, so posting order is kept.
#pragma once

#include <cstdint>

#include "core/request_pool.h"
#include "ofi/endpoint/completion.h"
#include "ofi/endpoint/endpoint.h"
#include "ofi/endpoint/path_peer.h"

namespace weft::ofi {

class TaggedRecvPath final : public CompletionOwner {
 public:
  // `empty` (a registered byte with its descriptor) takes 0-byte receives:
  // some providers (libfabric 2.x tcp) never complete a 0-length receive
  // that a larger message matches; the sender's size, carried as immediate
  // data, still turns such a message into a truncation error.
  TaggedRecvPath(Endpoint& endpoint, PathPeer peer, void* empty, void* empty_descriptor);
  TaggedRecvPath(const TaggedRecvPath&) = delete;
  TaggedRecvPath& operator=(const TaggedRecvPath&) = delete;

  ncclResult_t irecv(int n, void** data, const size_t* sizes, const int* tags, void** mhandles,
                     Request** request);
  ncclResult_t progress() override;
  void recycle(Request* request) override;
  ncclResult_t report_failure(int error, size_t overflow_length, size_t posted_size,
                              const char* text) override;
  bool in_flight();
  void cancel_receives();

 private:
  using RecvRequest = OfiRequest<kMaxRecvs, TaggedRecvPath>;

  // A grouped receive the provider has only partly accepted.
  struct PartialPost {
    RecvRequest* request = nullptr;
    int next = 0;
    void* data[kMaxRecvs] = {};
    void* descriptors[kMaxRecvs] = {};
    uint64_t tags[kMaxRecvs] = {};
  };

  // Posts slots [partial_.next, count); returns an error only on failure.
  ncclResult_t post_pending();

  Endpoint& endpoint_;
  PathPeer peer_;
  void* empty_;
  void* empty_descriptor_;
  PartialPost partial_;
  RequestPool<RecvRequest, kMaxRequests> pool_;
};

}  // namespace weft::ofi
