#include "ofi/tagged/tagged_send_path.h"

#include <rdma/fi_errno.h>

#include "ofi/endpoint/completion_failure.h"
#include "ofi/endpoint/memory_region.h"
#include "ofi/endpoint/tag_layout.h"
#include "weft/log.h"

namespace weft::ofi {

TaggedSendPath::TaggedSendPath(Endpoint& endpoint, PathPeer peer)
    : endpoint_(endpoint), peer_(std::move(peer)) {}

ncclResult_t TaggedSendPath::isend(void* data, size_t size, int tag, void* mhandle,
                                   Request** request) {
  SendRequest* req = pool_.acquire();
  if (req == nullptr) return progress();  // all slots busy: NCCL retries later
  req->start(this, 1, /*is_send=*/true);
  req->set_posted_size(0, size);
  uint64_t wire_tag = data_tag(peer_.remote_comm_id, tag);
  ssize_t rc;
  if (endpoint_.test_aids() && endpoint_.test_aids()->wire_mutation == WireMutation::kTaggedSize)
      [[unlikely]] {
    rc = endpoint_.send_data(data, size, descriptor_of(mhandle), size + 1, peer_.address, wire_tag,
                             req->op(0));
  } else if (host_memory(mhandle) && endpoint_.may_inject(size)) {
    rc = endpoint_.inject(data, size, peer_.address, wire_tag);
    if (rc == 0) req->complete_now(0);
  } else {
    rc = endpoint_.send(data, size, descriptor_of(mhandle), peer_.address, wire_tag, req->op(0));
  }
  if (rc == 0) {
    *request = req;
    return ncclSuccess;
  }
  pool_.release(req);
  if (rc == -FI_EAGAIN) return progress();
  WEFT_WARN("%s: isend of %zu bytes to %s failed: %s", endpoint_.device_name().c_str(), size,
            peer_.name.c_str(), fi_strerror((int)-rc));
  return ncclSystemError;
}

ncclResult_t TaggedSendPath::progress() {
  ncclResult_t result = endpoint_.poll();
  if (result != ncclSuccess) return result;
  return peer_.check_alive(endpoint_.device_name());
}

void TaggedSendPath::recycle(Request* request) {
  pool_.release(static_cast<SendRequest*>(request));
}

ncclResult_t TaggedSendPath::report_failure(int error, size_t overflow_length, size_t posted_size,
                                            const char* text) {
  return completion_failure("send", endpoint_, peer_.name, error, overflow_length, posted_size,
                            text);
}

bool TaggedSendPath::in_flight() {
  // Requests handed out but never tested are idle once finished.
  return pool_.any_in_use([](SendRequest& req) { return !req.finished(); });
}

}  // namespace weft::ofi
