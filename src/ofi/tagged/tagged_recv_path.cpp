#include "ofi/tagged/tagged_recv_path.h"

#include <rdma/fi_errno.h>

#include "ofi/endpoint/completion_failure.h"
#include "ofi/endpoint/memory_region.h"
#include "ofi/endpoint/tag_layout.h"
#include "ofi/fabric/provider_quirks.h"
#include "weft/log.h"

namespace weft::ofi {

TaggedRecvPath::TaggedRecvPath(Endpoint& endpoint, PathPeer peer, void* empty,
                               void* empty_descriptor)
    : endpoint_(endpoint),
      peer_(std::move(peer)),
      empty_(empty),
      empty_descriptor_(empty_descriptor) {}

ncclResult_t TaggedRecvPath::irecv(int n, void** data, const size_t* sizes, const int* tags,
                                   void** mhandles, Request** request) {
  if (partial_.request != nullptr) {
    // Keep posting order: finish the earlier group first.
    ncclResult_t result = post_pending();
    if (result != ncclSuccess || partial_.request != nullptr) return result;
  }
  RecvRequest* req = pool_.acquire();
  if (req == nullptr) return progress();
  req->start(this, n, /*is_send=*/false);
  partial_.request = req;
  partial_.next = 0;
  for (int i = 0; i < n; ++i) {
    partial_.data[i] = data[i];
    partial_.descriptors[i] = descriptor_of(mhandles == nullptr ? nullptr : mhandles[i]);
    partial_.tags[i] = data_tag(peer_.local_comm_id, tags[i]);
    req->set_posted_size(i, sizes == nullptr ? 0 : sizes[i]);
  }
  ncclResult_t result = post_pending();
  if (result != ncclSuccess) return result;
  if (partial_.request == req && partial_.next == 0) {
    // The provider took nothing: hand the slot back and let NCCL retry.
    partial_.request = nullptr;
    pool_.release(req);
    return ncclSuccess;
  }
  *request = req;
  return ncclSuccess;
}

ncclResult_t TaggedRecvPath::post_pending() {
  RecvRequest* req = partial_.request;
  while (partial_.next < req->count()) {
    int slot = partial_.next;
    void* buffer = partial_.data[slot];
    size_t length = req->posted_size(slot);
    void* descriptor = partial_.descriptors[slot];
    if (length == 0) {
      buffer = empty_;
      length = 1;
      descriptor = empty_descriptor_;
    }
    ssize_t rc = endpoint_.receive(buffer, length, descriptor, partial_.tags[slot], req->op(slot));
    if (rc == -FI_EAGAIN) return endpoint_.poll();
    if (rc != 0) {
      WEFT_WARN("%s: irecv of %zu bytes from %s failed: %s%s", endpoint_.device_name().c_str(),
                req->posted_size(slot), peer_.name.c_str(), fi_strerror((int)-rc),
                rc == -FI_ENOMEM ? receive_queue_full_note(endpoint_.provider_name()).c_str() : "");
      if (slot > 0) req->drop_unposted(req->count() - slot);
      partial_.request = nullptr;
      if (slot == 0) pool_.release(req);
      return ncclSystemError;
    }
    ++partial_.next;
  }
  partial_.request = nullptr;
  return ncclSuccess;
}

ncclResult_t TaggedRecvPath::progress() {
  if (partial_.request != nullptr) {
    ncclResult_t result = post_pending();
    if (result != ncclSuccess) return result;
  }
  ncclResult_t result = endpoint_.poll();
  if (result != ncclSuccess) return result;
  return peer_.check_alive(endpoint_.device_name());
}

void TaggedRecvPath::recycle(Request* request) {
  pool_.release(static_cast<RecvRequest*>(request));
}

ncclResult_t TaggedRecvPath::report_failure(int error, size_t overflow_length, size_t posted_size,
                                            const char* text) {
  return completion_failure("receive", endpoint_, peer_.name, error, overflow_length, posted_size,
                            text);
}

bool TaggedRecvPath::in_flight() {
  return pool_.any_in_use([](RecvRequest& req) { return !req.finished(); });
}

void TaggedRecvPath::cancel_receives() {
  if (partial_.request != nullptr) {
    partial_.request->drop_unposted(partial_.request->count() - partial_.next);
    partial_.request = nullptr;
  }
  pool_.for_each_in_use([this](RecvRequest& req) {
    if (req.finished()) return;
    for (int slot = 0; slot < req.count(); ++slot) endpoint_.cancel(req.op(slot));
  });
}

}  // namespace weft::ofi
