// Contexts: the primary context of each device and the calling thread's
// stack of current contexts.

#include "driver/contexts.h"

#include <vector>

#include "driver/api.h"
#include "driver/config.h"
#include "driver/trace.h"

namespace softcuda {

namespace {

thread_local std::vector<CUcontext> t_ctx_stack;

}  // namespace

CUctx_st g_ctx[kMaxDevices];

bool valid_ctx(CUcontext ctx) {
  for (const CUctx_st& c : g_ctx) {
    if (&c == ctx) return c.magic == kCtxMagic;
  }
  return false;
}

CUcontext current_ctx() {
  return t_ctx_stack.empty() ? nullptr : t_ctx_stack.back();
}

// The device of the calling thread's current context, which must be a live
// (retained) primary context of an existing device.
CUresult current_device(int* dev) {
  CUcontext ctx = current_ctx();
  if (ctx == nullptr || !valid_ctx(ctx) || ctx->retains.load() <= 0 || !valid_device(ctx->device)) {
    return CUDA_ERROR_INVALID_CONTEXT;
  }
  *dev = ctx->device;
  return CUDA_SUCCESS;
}

}  // namespace softcuda

using namespace softcuda;

SOFTCUDA_API CUresult cuDevicePrimaryCtxRetain(CUcontext* ctx, CUdevice dev) {
  Trace t("cuDevicePrimaryCtxRetain", "dev=%d", dev);
  REQUIRE_INIT(t);
  if (ctx == nullptr) return t(CUDA_ERROR_INVALID_VALUE);
  if (!valid_device(dev)) return t(CUDA_ERROR_INVALID_DEVICE);
  g_ctx[dev].retains.fetch_add(1);
  *ctx = &g_ctx[dev];
  return t(CUDA_SUCCESS);
}

SOFTCUDA_API CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev) {
  Trace t("cuDevicePrimaryCtxRelease_v2", "dev=%d", dev);
  REQUIRE_INIT(t);
  if (!valid_device(dev)) return t(CUDA_ERROR_INVALID_DEVICE);
  int n = g_ctx[dev].retains.load();
  do {
    if (n <= 0) return t(CUDA_ERROR_INVALID_CONTEXT);
  } while (!g_ctx[dev].retains.compare_exchange_weak(n, n - 1));
  return t(CUDA_SUCCESS);
}

SOFTCUDA_API CUresult cuDevicePrimaryCtxRelease(CUdevice dev) {
  return cuDevicePrimaryCtxRelease_v2(dev);
}

SOFTCUDA_API CUresult cuDevicePrimaryCtxGetState(CUdevice dev, unsigned int* flags, int* active) {
  Trace t("cuDevicePrimaryCtxGetState", "dev=%d", dev);
  REQUIRE_INIT(t);
  if (flags == nullptr || active == nullptr) return t(CUDA_ERROR_INVALID_VALUE);
  if (!valid_device(dev)) return t(CUDA_ERROR_INVALID_DEVICE);
  *flags = 0;
  *active = g_ctx[dev].retains.load() > 0 ? 1 : 0;
  return t(CUDA_SUCCESS);
}

SOFTCUDA_API CUresult cuCtxGetCurrent(CUcontext* ctx) {
  Trace t("cuCtxGetCurrent");
  REQUIRE_INIT(t);
  if (ctx == nullptr) return t(CUDA_ERROR_INVALID_VALUE);
  *ctx = current_ctx();
  return t(CUDA_SUCCESS);
}

SOFTCUDA_API CUresult cuCtxSetCurrent(CUcontext ctx) {
  Trace t("cuCtxSetCurrent", "ctx=%p", static_cast<void*>(ctx));
  REQUIRE_INIT(t);
  if (ctx == nullptr) {
    if (!t_ctx_stack.empty()) t_ctx_stack.pop_back();
    return t(CUDA_SUCCESS);
  }
  if (!valid_ctx(ctx)) return t(CUDA_ERROR_INVALID_CONTEXT);
  if (t_ctx_stack.empty()) {
    t_ctx_stack.push_back(ctx);
  } else {
    t_ctx_stack.back() = ctx;
  }
  return t(CUDA_SUCCESS);
}

SOFTCUDA_API CUresult cuCtxPushCurrent_v2(CUcontext ctx) {
  Trace t("cuCtxPushCurrent_v2", "ctx=%p", static_cast<void*>(ctx));
  REQUIRE_INIT(t);
  if (ctx == nullptr || !valid_ctx(ctx)) return t(CUDA_ERROR_INVALID_CONTEXT);
  t_ctx_stack.push_back(ctx);
  return t(CUDA_SUCCESS);
}

SOFTCUDA_API CUresult cuCtxPushCurrent(CUcontext ctx) {
  return cuCtxPushCurrent_v2(ctx);
}

SOFTCUDA_API CUresult cuCtxPopCurrent_v2(CUcontext* ctx) {
  Trace t("cuCtxPopCurrent_v2");
  REQUIRE_INIT(t);
  if (t_ctx_stack.empty()) return t(CUDA_ERROR_INVALID_CONTEXT);
  if (ctx != nullptr) *ctx = t_ctx_stack.back();
  t_ctx_stack.pop_back();
  return t(CUDA_SUCCESS);
}

SOFTCUDA_API CUresult cuCtxPopCurrent(CUcontext* ctx) {
  return cuCtxPopCurrent_v2(ctx);
}

SOFTCUDA_API CUresult cuCtxGetDevice(CUdevice* device) {
  Trace t("cuCtxGetDevice");
  REQUIRE_INIT(t);
  if (device == nullptr) return t(CUDA_ERROR_INVALID_VALUE);
  int dev = 0;
  CUresult r = current_device(&dev);
  if (r != CUDA_SUCCESS) return t(r);
  *device = dev;
  return t(CUDA_SUCCESS);
}

SOFTCUDA_API CUresult cuCtxSynchronize(void) {
  Trace t("cuCtxSynchronize");
  REQUIRE_INIT(t);
  int dev = 0;
  return t(current_device(&dev));
}
