// What the exported CUDA driver entry points share.
//
// Fidelity notes (where the double knowingly differs from a real driver):
// - The plain (unversioned) names of functions that have a _v2 variant, such
//   as cuMemAlloc or cuMemGetAddressRange, are exported with the 64-bit _v2
//   semantics. In the real libcuda they are 32-bit legacy entry points
//   (CUdeviceptr_v1, unsigned int sizes); libfabric 2.6 dlsym()s several of
//   them by their plain names (cuMemGetAddressRange, cuStreamDestroy,
//   cuEventDestroy, cuMemcpyDtoDAsync).
// - cuGetProcAddress resolves only the current (_v2 ...) variant of each
//   function; a cudaVersion older than that variant gets
//   CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT instead of a legacy variant.
// - Work is synchronous: streams and events are bookkeeping only.
// - A current context is required where the real driver needs one to pick a
//   device (allocations, IPC opens, streams, events, flushes); copies, memset
//   and pointer queries work in any thread once cuInit has succeeded.
#pragma once

#include "driver/init.h"

#define SOFTCUDA_API extern "C" __attribute__((visibility("default")))

#define REQUIRE_INIT(t) \
  if (!initialized()) return t(CUDA_ERROR_NOT_INITIALIZED)
