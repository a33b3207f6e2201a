#include "ofi/endpoint/endpoint_options.h"

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

}  // namespace weft::ofi
