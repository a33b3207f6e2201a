// forbid_cuda_calls (ofi/fabric/endpoint_options.h): GPU memory only where the provider
// promises not to call CUDA on NCCL's proxy thread.
#include <rdma/fi_errno.h>

#include <catch2/catch.hpp>
#include <map>

#include "ofi/fabric/endpoint_options.h"

using namespace weft::ofi;

namespace {

struct OptionEndpoint final : EndpointOptionCalls {
  int answer = 0;
  std::map<int, bool> values;
  int set(int name, const void* value, size_t size) override {
    REQUIRE(size == sizeof(bool));
    if (answer != 0) return answer;
    values[name] = *static_cast<const bool*>(value);
    return 0;
  }
  int get(int, void*, size_t*) override { return -FI_ENOPROTOOPT; }
};

}  // namespace

TEST_CASE("gpu: a provider that accepts CUDA_API_PERMITTED=false keeps GPU memory", "[unit][gpu]") {
  OptionEndpoint ep;
  std::string refusal;
  CHECK(forbid_cuda_calls(ep, "verbs0", &refusal));
  CHECK(ep.values.at(fabric_option::kCudaApiPermitted) == false);
  CHECK(refusal.empty());
}

TEST_CASE("gpu: a provider that must call CUDA, or does not know the option, gets none",
          "[unit][gpu]") {
  // shm answers EOPNOTSUPP (its GPU copies are cudaMemcpy); a provider that
  // does not know the option makes no promise.
  const int answer = GENERATE(-FI_EOPNOTSUPP, -FI_ENOPROTOOPT);
  OptionEndpoint ep;
  ep.answer = answer;
  std::string refusal;
  CHECK_FALSE(forbid_cuda_calls(ep, "shm", &refusal));
  CHECK(refusal.find("refused FI_OPT_CUDA_API_PERMITTED=false") != std::string::npos);
  CHECK(refusal.find(fi_strerror(-answer)) != std::string::npos);
  CHECK(refusal.find("NCCL's proxy thread") != std::string::npos);
}
