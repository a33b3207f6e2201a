// A libcuda stand-in for weft-cuda-tests: softcuda behind a cuGetProcAddress
// that hides the entry points named in WEFT_TEST_CUDA_HIDE (comma-separated
// base names), as an older or stripped-down driver would lack them. Built
// twice: with the CUDA 12 cuGetProcAddress_v2 and the CUDA 11.3
// cuGetProcAddress (HIDING_DRIVER_V1_ONLY: the old form alone).
#include <dlfcn.h>

#include <cstdlib>
#include <cstring>
#include <string>

#include "core/cuda/cuda_api.h"

using namespace weft::cuda;

namespace {

void* softcuda() {
  static void* handle = dlopen(WEFT_SOFTCUDA_LIB, RTLD_NOW | RTLD_LOCAL);
  return handle;
}

bool hidden(const char* symbol) {
  const char* list = std::getenv("WEFT_TEST_CUDA_HIDE");
  if (list == nullptr || symbol == nullptr) return false;
  const std::string names = std::string(",") + list + ",";
  return names.find(std::string(",") + symbol + ",") != std::string::npos;
}

}  // namespace

#define HIDING_DRIVER_API extern "C" __attribute__((visibility("default")))

#ifndef HIDING_DRIVER_V1_ONLY
HIDING_DRIVER_API CUresult cuGetProcAddress_v2(const char* symbol, void** pfn, int cuda_version,
                                               cuuint64_t flags,
                                               CUdriverProcAddressQueryResult* status) {
  if (hidden(symbol)) {
    *pfn = nullptr;
    if (status != nullptr) *status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    return CUDA_SUCCESS;
  }
  auto real = reinterpret_cast<PFN_cuGetProcAddress_v2>(dlsym(softcuda(), "cuGetProcAddress_v2"));
  if (real == nullptr) return CUDA_ERROR_NOT_INITIALIZED;
  return real(symbol, pfn, cuda_version, flags, status);
}
#endif

HIDING_DRIVER_API CUresult cuGetProcAddress(const char* symbol, void** pfn, int cuda_version,
                                            cuuint64_t flags) {
  if (hidden(symbol)) {
    *pfn = nullptr;
    return CUDA_ERROR_NOT_FOUND;
  }
  auto real = reinterpret_cast<PFN_cuGetProcAddress_v1>(dlsym(softcuda(), "cuGetProcAddress"));
  if (real == nullptr) return CUDA_ERROR_NOT_INITIALIZED;
  return real(symbol, pfn, cuda_version, flags);
}
