// What weft sets on an EFA endpoint (either fabric: efa or efa-direct)
// before enabling it, and the answer it gives to each refusal:
//
// - FI_OPT_CUDA_API_PERMITTED = false (GPU memory only): the provider must
//   not call CUDA from NCCL's proxy thread, which can deadlock against the
//   application's CUDA calls. Refused: no GPU memory on this device.
// - FI_OPT_SHARED_MEMORY_PERMITTED = false: local peers must go over the
//   NIC too, or weft's flush does not cover what they write. Refused: no
//   GPU memory on this device.
// - the 128-byte in-order option of the protocol's data operation
//   (SENDRECV for tagged, WRITE for RDMA): NCCL's LL and LL128 protocols need
//   it. Refused: reported to core's LineOrderGuard (NCCL_PROTO=Simple).
// - FI_OPT_EFA_EMULATED_WRITE must read false for the RDMA protocol:
//   writes emulated by messages make it slower than tagged. Otherwise (or
//   when it cannot be read) the endpoint uses the tagged protocol.
//
// FI_OPT_MAX_MSG_SIZE is left alone: on libfabric 2.x the efa fabric no
// longer has the zero-copy receive path it once enabled (the provider keeps
// only a compatibility check), and that path was never open to endpoints
// with FI_TAGGED, which weft's efa fabric endpoints have.
#pragma once

#include <rdma/fabric.h>

#include <string>

#include "ofi/fabric/endpoint_options.h"

namespace weft::ofi {

struct EfaWanted {
  bool gpu = false;   // GPU memory will be registered on the endpoint
  bool rdma = false;  // the RDMA protocol (writes); else tagged (send/recv)
};

struct EfaOutcome {
  bool gpu = true;            // GPU memory may be used (when it was wanted)
  bool ordered_128 = true;    // the protocol's in-order option was accepted
  bool writes_native = true;  // RDMA protocol: writes are the device's own
  std::string gpu_refusal;    // what was refused, when !gpu
  std::string order_refusal;  // what was refused, when !ordered_128
  std::string writes_reason;  // why, when !writes_native
};

// Sets and reads the options above, logging each answer at INFO.
EfaOutcome apply_efa_settings(EndpointOptionCalls& calls, const EfaWanted& wanted,
                              const std::string& device);

// Opens a scratch fabric, domain and endpoint for `info` and applies the
// settings, so that init knows the answers before NCCL reads NCCL_PROTO or
// the device's pointer support. False (with `error`) when the endpoint
// cannot be opened.
bool probe_efa_settings(const fi_info* info, const EfaWanted& wanted, const std::string& device,
                        EfaOutcome* outcome, std::string* error);

}  // namespace weft::ofi
