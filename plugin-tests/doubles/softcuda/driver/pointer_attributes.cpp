// What the driver says about a pointer: cuPointerGetAttribute(s) and
// cuPointerSetAttribute.

#include <mutex>

#include "driver/api.h"
#include "driver/config.h"
#include "driver/contexts.h"
#include "driver/ranges.h"
#include "driver/trace.h"

namespace softcuda {

namespace {

unsigned memory_type(const Range& r) {
  return r.is_device() ? CU_MEMORYTYPE_DEVICE : CU_MEMORYTYPE_HOST;
}

// Caller holds g_mu; r is null for an address the driver does not know.
CUresult pointer_attribute(const Range* r, CUpointer_attribute attr, void* data, uintptr_t p) {
  if (r == nullptr) return CUDA_ERROR_INVALID_VALUE;
  switch (attr) {
    case CU_POINTER_ATTRIBUTE_CONTEXT:
      *static_cast<CUcontext*>(data) = &g_ctx[r->device];
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
      *static_cast<unsigned*>(data) = memory_type(*r);
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_DEVICE_POINTER:
      *static_cast<CUdeviceptr*>(data) = p;
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_HOST_POINTER:
      if (r->is_device()) return CUDA_ERROR_INVALID_VALUE;
      *static_cast<void**>(data) = reinterpret_cast<void*>(p);
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_SYNC_MEMOPS:
      *static_cast<unsigned*>(data) = r->sync_memops ? 1 : 0;
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_BUFFER_ID:
      *static_cast<unsigned long long*>(data) = r->buffer_id;
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_IS_MANAGED:
      *static_cast<unsigned*>(data) = 0;
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
      *static_cast<int*>(data) = r->device;
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE:
      *static_cast<unsigned*>(data) = r->kind == Kind::Device ? 1 : 0;
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
      *static_cast<CUdeviceptr*>(data) = r->base;
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
      *static_cast<size_t*>(data) = r->size;
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_MAPPED:
      *static_cast<unsigned*>(data) = 1;
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_IS_GPU_DIRECT_RDMA_CAPABLE:
      *static_cast<unsigned*>(data) = r->is_device() && gdr_supported() ? 1 : 0;
      return CUDA_SUCCESS;
    default:
      return CUDA_ERROR_INVALID_VALUE;
  }
}

// The "NULL" values cuPointerGetAttributes reports for an unknown address.
CUresult default_attribute(CUpointer_attribute attr, void* data) {
  switch (attr) {
    case CU_POINTER_ATTRIBUTE_CONTEXT:
      *static_cast<CUcontext*>(data) = nullptr;
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_DEVICE_POINTER:
    case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
      *static_cast<CUdeviceptr*>(data) = 0;
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_HOST_POINTER:
      *static_cast<void**>(data) = nullptr;
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_BUFFER_ID:
      *static_cast<unsigned long long*>(data) = 0;
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
      *static_cast<size_t*>(data) = 0;
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
      *static_cast<int*>(data) = -2;  // what the runtime reports for unregistered memory
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
    case CU_POINTER_ATTRIBUTE_SYNC_MEMOPS:
    case CU_POINTER_ATTRIBUTE_IS_MANAGED:
    case CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE:
    case CU_POINTER_ATTRIBUTE_MAPPED:
    case CU_POINTER_ATTRIBUTE_IS_GPU_DIRECT_RDMA_CAPABLE:
      *static_cast<unsigned*>(data) = 0;
      return CUDA_SUCCESS;
    default:
      return CUDA_ERROR_INVALID_VALUE;
  }
}

}  // namespace

}  // namespace softcuda

using namespace softcuda;

SOFTCUDA_API CUresult cuPointerGetAttribute(void* data, CUpointer_attribute attribute,
                                            CUdeviceptr ptr) {
  Trace t("cuPointerGetAttribute", "attribute=%d, ptr=0x%llx", static_cast<int>(attribute), ptr);
  REQUIRE_INIT(t);
  if (data == nullptr) return t(CUDA_ERROR_INVALID_VALUE);
  std::lock_guard<std::mutex> lock(g_mu);
  return t(pointer_attribute(find_range(ptr), attribute, data, ptr));
}

SOFTCUDA_API CUresult cuPointerGetAttributes(unsigned int count, CUpointer_attribute* attributes,
                                             void** data, CUdeviceptr ptr) {
  Trace t("cuPointerGetAttributes", "count=%u, ptr=0x%llx", count, ptr);
  REQUIRE_INIT(t);
  if (count == 0 || attributes == nullptr || data == nullptr) return t(CUDA_ERROR_INVALID_VALUE);
  std::lock_guard<std::mutex> lock(g_mu);
  const Range* r = find_range(ptr);
  for (unsigned i = 0; i < count; ++i) {
    if (data[i] == nullptr) return t(CUDA_ERROR_INVALID_VALUE);
    CUresult res = r != nullptr ? pointer_attribute(r, attributes[i], data[i], ptr)
                                : default_attribute(attributes[i], data[i]);
    if (res == CUDA_ERROR_INVALID_VALUE && r != nullptr &&
        attributes[i] == CU_POINTER_ATTRIBUTE_HOST_POINTER) {
      *static_cast<void**>(data[i]) = nullptr;  // no host alias: NULL, not an error
      res = CUDA_SUCCESS;
    }
    if (res != CUDA_SUCCESS) return t(res);
  }
  return t(CUDA_SUCCESS);
}

SOFTCUDA_API CUresult cuPointerSetAttribute(const void* value, CUpointer_attribute attribute,
                                            CUdeviceptr ptr) {
  Trace t("cuPointerSetAttribute", "attribute=%d, ptr=0x%llx", static_cast<int>(attribute), ptr);
  REQUIRE_INIT(t);
  if (value == nullptr || attribute != CU_POINTER_ATTRIBUTE_SYNC_MEMOPS) {
    return t(CUDA_ERROR_INVALID_VALUE);
  }
  std::lock_guard<std::mutex> lock(g_mu);
  Range* r = find_range(ptr);
  if (r == nullptr || !r->is_device()) return t(CUDA_ERROR_INVALID_VALUE);
  if (!sync_memops_supported()) return t(CUDA_ERROR_NOT_SUPPORTED);
  r->sync_memops = *static_cast<const unsigned*>(value) != 0;
  return t(CUDA_SUCCESS);
}
