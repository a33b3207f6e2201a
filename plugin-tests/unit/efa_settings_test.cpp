#include "ofi/endpoint/efa_settings.h"

#include <rdma/fi_errno.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <map>
#include <vector>

#include "core/line_order_guard.h"
#include "ofi/discovery/provider_discovery.h"

using namespace weft;
using namespace weft::ofi;

namespace {

// An endpoint that refuses the options it is told to and remembers what
// was set; reads FI_OPT_EFA_EMULATED_WRITE as configured.
struct FakeEndpoint final : EndpointOptionCalls {
  std::map<int, int> refuse;  // option -> negative errno
  std::map<int, bool> values;
  std::vector<int> order;
  int emulated_read_rc = 0;
  bool emulated = false;

  int set(int name, const void* value, size_t size) override {
    order.push_back(name);
    REQUIRE(size == sizeof(bool));
    if (auto it = refuse.find(name); it != refuse.end()) return it->second;
    values[name] = *static_cast<const bool*>(value);
    return 0;
  }
  int get(int name, void* value, size_t* size) override {
    REQUIRE(name == fabric_option::kEmulatedWrite);
    if (emulated_read_rc != 0) return emulated_read_rc;
    REQUIRE(*size >= sizeof(bool));
    *static_cast<bool*>(value) = emulated;
    *size = sizeof(bool);
    return 0;
  }
};

EfaWanted wanted(bool gpu, bool rdma) {
  EfaWanted w;
  w.gpu = gpu;
  w.rdma = rdma;
  return w;
}

}  // namespace

TEST_CASE("efa: every setting accepted keeps GPU memory, order and device writes", "[unit][efa]") {
  FakeEndpoint ep;
  EfaOutcome out = apply_efa_settings(ep, wanted(true, true), "efa0");
  CHECK(out.gpu);
  CHECK(out.ordered_128);
  CHECK(out.writes_native);
  CHECK(ep.values.at(fabric_option::kCudaApiPermitted) == false);
  CHECK(ep.values.at(fabric_option::kSharedMemoryPermitted) == false);
  CHECK(ep.values.at(fabric_option::kWriteInOrder128) == true);
  CHECK(ep.values.count(fabric_option::kSendRecvInOrder128) == 0);
}

TEST_CASE("efa: the tagged protocol asks for send/recv order, not write order", "[unit][efa]") {
  FakeEndpoint ep;
  EfaOutcome out = apply_efa_settings(ep, wanted(false, false), "efa0");
  CHECK(out.ordered_128);
  CHECK(ep.values.at(fabric_option::kSendRecvInOrder128) == true);
  CHECK(ep.values.count(fabric_option::kWriteInOrder128) == 0);
  // Host memory only: CUDA calls are not forbidden, nothing needs it.
  CHECK(ep.values.count(fabric_option::kCudaApiPermitted) == 0);
}

TEST_CASE("efa: a refused CUDA_API_PERMITTED turns GPU memory off", "[unit][efa]") {
  FakeEndpoint ep;
  ep.refuse[fabric_option::kCudaApiPermitted] = -FI_EOPNOTSUPP;
  EfaOutcome out = apply_efa_settings(ep, wanted(true, true), "efa0");
  CHECK_FALSE(out.gpu);
  CHECK(out.gpu_refusal.find("FI_OPT_CUDA_API_PERMITTED=false") != std::string::npos);
  CHECK(out.ordered_128);
}

TEST_CASE("efa: a refused SHARED_MEMORY_PERMITTED turns GPU memory off", "[unit][efa]") {
  FakeEndpoint ep;
  ep.refuse[fabric_option::kSharedMemoryPermitted] = -FI_EINVAL;
  EfaOutcome gpu = apply_efa_settings(ep, wanted(true, false), "efa0");
  CHECK_FALSE(gpu.gpu);
  CHECK(gpu.gpu_refusal.find("FI_OPT_SHARED_MEMORY_PERMITTED=false") != std::string::npos);
  // Host memory only: nothing to turn off.
  EfaOutcome host = apply_efa_settings(ep, wanted(false, false), "efa0");
  CHECK(host.gpu);
}

TEST_CASE("efa: a refused in-order option is reported for each protocol", "[unit][efa]") {
  FakeEndpoint ep;
  ep.refuse[fabric_option::kWriteInOrder128] = -FI_EOPNOTSUPP;
  ep.refuse[fabric_option::kSendRecvInOrder128] = -FI_EOPNOTSUPP;
  EfaOutcome rdma = apply_efa_settings(ep, wanted(false, true), "efa0");
  CHECK_FALSE(rdma.ordered_128);
  CHECK(rdma.order_refusal.find("FI_OPT_EFA_WRITE_IN_ORDER_ALIGNED_128_BYTES=true") !=
        std::string::npos);
  EfaOutcome tagged = apply_efa_settings(ep, wanted(false, false), "efa0");
  CHECK_FALSE(tagged.ordered_128);
  CHECK(tagged.order_refusal.find("FI_OPT_EFA_SENDRECV_IN_ORDER_ALIGNED_128_BYTES=true") !=
        std::string::npos);
}

TEST_CASE("efa: emulated or unreadable writes rule out the RDMA protocol", "[unit][efa]") {
  FakeEndpoint ep;
  ep.emulated = true;
  EfaOutcome emulated = apply_efa_settings(ep, wanted(false, true), "efa0");
  CHECK_FALSE(emulated.writes_native);
  CHECK(emulated.writes_reason.find("emulates RDMA writes") != std::string::npos);

  FakeEndpoint old;
  old.emulated_read_rc = -FI_ENOPROTOOPT;
  EfaOutcome unreadable = apply_efa_settings(old, wanted(false, true), "efa0");
  CHECK_FALSE(unreadable.writes_native);
  CHECK(unreadable.writes_reason.find("cannot be read") != std::string::npos);

  // The tagged protocol does not ask.
  EfaOutcome tagged = apply_efa_settings(ep, wanted(false, false), "efa0");
  CHECK(tagged.writes_native);
}

TEST_CASE("efa: both fabrics and layered names are the EFA provider", "[unit][efa]") {
  CHECK(is_efa_provider("efa"));
  CHECK(is_efa_provider("efa;ofi_rxd"));
  CHECK_FALSE(is_efa_provider("verbs;ofi_rxm"));
  CHECK_FALSE(is_efa_provider("tcp"));
}

TEST_CASE("line order: a refusal sets NCCL_PROTO=Simple unless the user chose",
          "[unit][efa][line_order]") {
  LineOrderGuard guard;
  ::unsetenv("NCCL_PROTO");
  CHECK(guard.report("efa0", false, "refused") == ncclSuccess);
  CHECK(guard.state() == LineOrderGuard::State::Restricted);
  REQUIRE(std::getenv("NCCL_PROTO") != nullptr);
  CHECK(std::string(std::getenv("NCCL_PROTO")) == "Simple");
  // Restricted stays restricted: ordered endpoints later change nothing.
  CHECK(guard.report("efa1", true, "") == ncclSuccess);
  CHECK(guard.report("efa1", false, "refused") == ncclSuccess);

  LineOrderGuard user;
  ::setenv("NCCL_PROTO", "LL128,Simple", 1);
  CHECK(user.report("efa0", false, "refused") == ncclSuccess);
  CHECK(std::string(std::getenv("NCCL_PROTO")) == "LL128,Simple");
  ::unsetenv("NCCL_PROTO");
}

TEST_CASE("line order: losing the order after NCCL was left free fails",
          "[unit][efa][line_order]") {
  LineOrderGuard guard;
  ::unsetenv("NCCL_PROTO");
  CHECK(guard.report("efa0", true, "") == ncclSuccess);
  CHECK(guard.state() == LineOrderGuard::State::Ordered);
  CHECK(guard.report("efa0", false, "refused") == ncclSystemError);
  CHECK(std::getenv("NCCL_PROTO") == nullptr);
}
