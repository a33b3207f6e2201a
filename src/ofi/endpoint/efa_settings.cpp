#include "ofi/endpoint/efa_settings.h"

#include <rdma/fi_errno.h>

#include "ofi/fabric/endpoint_options.h"
#include "ofi/fabric/fabric_ptr.h"
#include "weft/log.h"

namespace weft::ofi {

namespace {

// Sets a bool option; true when accepted. `refusal` gets what was refused.
bool set_bool(EndpointOptionCalls& calls, int name, const char* option, bool value,
              const std::string& device, std::string* refusal) {
  int rc = calls.set(name, &value, sizeof(value));
  std::string asked = std::string(option) + "=" + (value ? "true" : "false");
  if (rc == 0) {
    WEFT_INFO(NCCL_INIT | NCCL_NET, "%s: fi_setopt %s: accepted", device.c_str(), asked.c_str());
    return true;
  }
  *refusal = "the provider refused " + asked + " (" + fi_strerror(-rc) + ")";
  WEFT_INFO(NCCL_INIT | NCCL_NET, "%s: fi_setopt %s: refused (%s)", device.c_str(), asked.c_str(),
            fi_strerror(-rc));
  return false;
}

}  // namespace

EfaOutcome apply_efa_settings(EndpointOptionCalls& calls, const EfaWanted& wanted,
                              const std::string& device) {
  EfaOutcome outcome;
  if (wanted.gpu) {
    outcome.gpu = forbid_cuda_calls(calls, device, &outcome.gpu_refusal);
  }
  std::string shm_refusal;
  if (!set_bool(calls, fabric_option::kSharedMemoryPermitted, "FI_OPT_SHARED_MEMORY_PERMITTED",
                false, device, &shm_refusal) &&
      wanted.gpu && outcome.gpu) {
    outcome.gpu = false;
    outcome.gpu_refusal = shm_refusal;
  }
  if (wanted.rdma) {
    outcome.ordered_128 = set_bool(calls, fabric_option::kWriteInOrder128,
                                   "FI_OPT_EFA_WRITE_IN_ORDER_ALIGNED_128_BYTES", true, device,
                                   &outcome.order_refusal);
    bool emulated = true;
    size_t size = sizeof(emulated);
    int rc = calls.get(fabric_option::kEmulatedWrite, &emulated, &size);
    if (rc != 0 || size != sizeof(emulated)) {
      outcome.writes_native = false;
      outcome.writes_reason = std::string("FI_OPT_EFA_EMULATED_WRITE cannot be read (") +
                              (rc != 0 ? fi_strerror(-rc) : "unexpected size") + ")";
    } else if (emulated) {
      outcome.writes_native = false;
      outcome.writes_reason = "the provider emulates RDMA writes with messages here";
    }
    WEFT_INFO(NCCL_INIT | NCCL_NET, "%s: fi_getopt FI_OPT_EFA_EMULATED_WRITE: %s", device.c_str(),
              outcome.writes_native ? "false (device writes)" : outcome.writes_reason.c_str());
  } else {
    outcome.ordered_128 = set_bool(calls, fabric_option::kSendRecvInOrder128,
                                   "FI_OPT_EFA_SENDRECV_IN_ORDER_ALIGNED_128_BYTES", true, device,
                                   &outcome.order_refusal);
  }
  return outcome;
}

bool probe_efa_settings(const fi_info* info, const EfaWanted& wanted, const std::string& device,
                        EfaOutcome* outcome, std::string* error) {
  ScratchDomain scratch;
  if (!open_scratch_domain(info, &scratch, error)) return false;
  fid_ep* ep_raw = nullptr;
  if (int rc = fi_endpoint(scratch.domain.get(), const_cast<fi_info*>(info), &ep_raw, nullptr);
      rc != 0) {
    *error = std::string("fi_endpoint failed: ") + fi_strerror(-rc);
    return false;
  }
  FabricPtr<fid_ep> endpoint(ep_raw);
  FabricOptionCalls calls(endpoint.get());
  *outcome = apply_efa_settings(calls, wanted, device);
  return true;
}

}  // namespace weft::ofi
