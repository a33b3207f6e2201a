// Contexts: the primary context of each device (only primary contexts
// exist) and the calling thread's stack of current contexts.
#pragma once

#include <atomic>
#include <cstdint>

#include "cuda_abi.h"
#include "driver/config.h"

namespace softcuda {

constexpr uint32_t kCtxMagic = 0x43545853;  // "SXTC"

}  // namespace softcuda

struct CUctx_st {
  uint32_t magic = softcuda::kCtxMagic;
  int device = 0;
  std::atomic<int> retains{0};
};

namespace softcuda {

extern CUctx_st g_ctx[kMaxDevices];

bool valid_ctx(CUcontext ctx);
CUcontext current_ctx();
// The device of the calling thread's current context, which must be a live
// (retained) primary context of an existing device.
CUresult current_device(int* dev);

}  // namespace softcuda
