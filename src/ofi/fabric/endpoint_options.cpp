#include "ofi/fabric/endpoint_options.h"

#include <rdma/fi_errno.h>

#include "weft/log.h"

namespace weft::ofi {

#if FI_MAJOR_VERSION >= 2
static_assert(fabric_option::kCudaApiPermitted == FI_OPT_CUDA_API_PERMITTED);
static_assert(fabric_option::kSharedMemoryPermitted == FI_OPT_SHARED_MEMORY_PERMITTED);
static_assert(fabric_option::kSendRecvInOrder128 == FI_OPT_EFA_SENDRECV_IN_ORDER_ALIGNED_128_BYTES);
static_assert(fabric_option::kWriteInOrder128 == FI_OPT_EFA_WRITE_IN_ORDER_ALIGNED_128_BYTES);
static_assert(fabric_option::kEmulatedWrite == FI_OPT_EFA_EMULATED_WRITE);
#endif
static_assert(fabric_option::kEfaBase == FI_OPT_EFA_RNR_RETRY);

int FabricOptionCalls::set(int name, const void* value, size_t size) {
  return fi_setopt(&endpoint_->fid, FI_OPT_ENDPOINT, name, value, size);
}

int FabricOptionCalls::get(int name, void* value, size_t* size) {
  return fi_getopt(&endpoint_->fid, FI_OPT_ENDPOINT, name, value, size);
}

bool forbid_cuda_calls(EndpointOptionCalls& calls, const std::string& device,
                       std::string* refusal) {
  const bool permitted = false;
  int rc = calls.set(fabric_option::kCudaApiPermitted, &permitted, sizeof(permitted));
  if (rc == 0) {
    WEFT_INFO(NCCL_INIT | NCCL_NET, "%s: fi_setopt FI_OPT_CUDA_API_PERMITTED=false: accepted",
              device.c_str());
    return true;
  }
  *refusal = "the provider refused FI_OPT_CUDA_API_PERMITTED=false (" +
             std::string(fi_strerror(-rc)) +
             "): it would call CUDA on NCCL's proxy thread, which can hang against NCCL's kernels";
  WEFT_INFO(NCCL_INIT | NCCL_NET, "%s: fi_setopt FI_OPT_CUDA_API_PERMITTED=false: refused (%s)",
            device.c_str(), fi_strerror(-rc));
  return false;
}

}  // namespace weft::ofi
