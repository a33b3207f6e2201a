#include "ofi/rdma/rdma_recv_request.h"

#include "ofi/rdma/rdma_recv_path.h"

namespace weft::ofi {

ncclResult_t RdmaRecvRequest::test(int* done, int* sizes) {
  *done = 0;
  if (!finished()) {
    ncclResult_t result = path_->progress();
    if (result != ncclSuccess) return result;
    if (!finished()) return ncclSuccess;
  }
  RdmaRecvPath* path = path_;
  if (int error = error_.load(std::memory_order_relaxed); error != 0) {
    const size_t posted = error_op_ < kCtsOp ? posted_sizes_[error_op_] : 0;
    ncclResult_t result = path->report_failure(error, error_overflow_, posted, error_text_);
    path->recycle(this);
    return result;
  }
  if (sizes != nullptr) {
    for (int i = 0; i < entries_; ++i) sizes[i] = static_cast<int>(lengths_[i]);
  }
  *done = 1;
  path->recycle(this);
  return ncclSuccess;
}

}  // namespace weft::ofi
