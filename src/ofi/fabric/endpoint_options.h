// Endpoint options (fi_setopt / fi_getopt at FI_OPT_ENDPOINT level): their
// numbers, and the calls behind an interface. Used for every provider
// (FI_OPT_CUDA_API_PERMITTED: forbid_cuda_calls, when GPU support is probed
// and on every endpoint) and for EFA's own settings (efa_settings.h).
#pragma once

#include <rdma/fabric.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_ext.h>

#include <cstddef>
#include <string>

namespace weft::ofi {

// libfabric's option numbers: part of its ABI, declared here because
// libfabric 1.17's headers lack the newer ones.
namespace fabric_option {
constexpr int kCudaApiPermitted = 10;
constexpr int kSharedMemoryPermitted = 11;
constexpr int kEfaBase = -(0xefa << 16);
constexpr int kEmulatedWrite = kEfaBase + 2;
constexpr int kSendRecvInOrder128 = kEfaBase + 5;
constexpr int kWriteInOrder128 = kEfaBase + 6;
}  // namespace fabric_option

// fi_setopt and fi_getopt on one endpoint at FI_OPT_ENDPOINT level, behind
// an interface so that tests reach every branch without the provider.
class EndpointOptionCalls {
 public:
  virtual int set(int name, const void* value, size_t size) = 0;
  virtual int get(int name, void* value, size_t* size) = 0;

 protected:
  ~EndpointOptionCalls() = default;
};

class FabricOptionCalls final : public EndpointOptionCalls {
 public:
  explicit FabricOptionCalls(fid_ep* endpoint) : endpoint_(endpoint) {}
  int set(int name, const void* value, size_t size) override;
  int get(int name, void* value, size_t* size) override;

 private:
  fid_ep* endpoint_;
};

// Sets FI_OPT_CUDA_API_PERMITTED = false on an endpoint that will carry GPU
// memory. A provider that calls CUDA on its own (shm and rxm without direct
// send copy GPU data with cudaMemcpy, and libfabric follows a copy to or
// from host memory with cudaDeviceSynchronize) does so on NCCL's proxy
// thread, where it waits for NCCL's own kernels, which wait for the proxy:
// a hang (seen on an H200 with 2.6's shm). False, with `refusal`, when the
// provider refuses or does not know the option: no GPU memory there.
bool forbid_cuda_calls(EndpointOptionCalls& calls, const std::string& device, std::string* refusal);

}  // namespace weft::ofi
