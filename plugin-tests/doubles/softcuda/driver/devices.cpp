// Devices: cuInit, which finds them, the driver version, and what each
// device says about itself.

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "driver/api.h"
#include "driver/config.h"
#include "driver/contexts.h"
#include "driver/init.h"
#include "driver/trace.h"

namespace softcuda {

namespace {

struct PciId {
  unsigned domain, bus, device, function;
};

PciId pci_id(int dev) {
  PciId id{0, 0x18u + 4u * static_cast<unsigned>(dev), 0, 0};
  const char* list = std::getenv("SOFTCUDA_PCI_BUS_IDS");
  if (list == nullptr) return id;
  std::string s(list);
  size_t start = 0;
  for (int i = 0; start <= s.size(); ++i) {
    size_t comma = s.find(',', start);
    std::string item =
        s.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (i == dev) {
      PciId parsed{0, 0, 0, 0};
      if (std::sscanf(item.c_str(), "%x:%x:%x.%x", &parsed.domain, &parsed.bus, &parsed.device,
                      &parsed.function) == 4) {
        return parsed;
      }
      return id;
    }
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return id;
}

// Device attributes with a fixed value: an H100 SXM, as far as it matters.
struct AttributeValue {
  CUdevice_attribute attribute;
  int value;
};

constexpr AttributeValue kFixedAttributes[] = {
    {CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK, 1024},
    {CU_DEVICE_ATTRIBUTE_WARP_SIZE, 32},
    {CU_DEVICE_ATTRIBUTE_CLOCK_RATE, 1980000},
    {CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, 132},
    {CU_DEVICE_ATTRIBUTE_INTEGRATED, 0},
    {CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY, 1},
    {CU_DEVICE_ATTRIBUTE_COMPUTE_MODE, 0},
    {CU_DEVICE_ATTRIBUTE_CONCURRENT_KERNELS, 1},
    {CU_DEVICE_ATTRIBUTE_ECC_ENABLED, 1},
    {CU_DEVICE_ATTRIBUTE_TCC_DRIVER, 0},
    {CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT, 3},
    {CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING, 1},
    {CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, 9},
    {CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, 0},
    {CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY, 1},
    {CU_DEVICE_ATTRIBUTE_CAN_FLUSH_REMOTE_WRITES, 0},
    {CU_DEVICE_ATTRIBUTE_HOST_REGISTER_SUPPORTED, 1},
    // No cuMemCreate / cuMemMap / memory pools / IPC events in the double:
    // reported absent so that callers stay on what it implements.
    {CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, 0},
    {CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED, 0},
    {CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED, 0},
    {CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED, 0},
    {CU_DEVICE_ATTRIBUTE_IPC_EVENT_SUPPORTED, 0},
    {CU_DEVICE_ATTRIBUTE_HOST_ALLOC_DMA_BUF_SUPPORTED, 0},
};

const AttributeValue* fixed_attribute(CUdevice_attribute attribute) {
  for (const AttributeValue& a : kFixedAttributes) {
    if (a.attribute == attribute) return &a;
  }
  return nullptr;
}

}  // namespace

}  // namespace softcuda

using namespace softcuda;

SOFTCUDA_API CUresult cuInit(unsigned int flags) {
  Trace t("cuInit", "flags=%u", flags);
  if (flags != 0) return t(CUDA_ERROR_INVALID_VALUE);
  if (initialized()) return t(CUDA_SUCCESS);
  if (device_count() == 0) return t(CUDA_ERROR_NO_DEVICE);
  for (int i = 0; i < kMaxDevices; ++i) g_ctx[i].device = i;
  set_initialized();
  return t(CUDA_SUCCESS);
}

SOFTCUDA_API CUresult cuDriverGetVersion(int* version) {
  Trace t("cuDriverGetVersion");
  if (version == nullptr) return t(CUDA_ERROR_INVALID_VALUE);
  *version = driver_version();
  return t(CUDA_SUCCESS);
}

SOFTCUDA_API CUresult cuDeviceGetCount(int* count) {
  Trace t("cuDeviceGetCount");
  REQUIRE_INIT(t);
  if (count == nullptr) return t(CUDA_ERROR_INVALID_VALUE);
  *count = device_count();
  return t(CUDA_SUCCESS);
}

SOFTCUDA_API CUresult cuDeviceGet(CUdevice* device, int ordinal) {
  Trace t("cuDeviceGet", "ordinal=%d", ordinal);
  REQUIRE_INIT(t);
  if (device == nullptr) return t(CUDA_ERROR_INVALID_VALUE);
  if (!valid_device(ordinal)) return t(CUDA_ERROR_INVALID_DEVICE);
  *device = ordinal;
  return t(CUDA_SUCCESS);
}

SOFTCUDA_API CUresult cuDeviceGetName(char* name, int len, CUdevice dev) {
  Trace t("cuDeviceGetName", "len=%d, dev=%d", len, dev);
  REQUIRE_INIT(t);
  if (name == nullptr || len <= 0) return t(CUDA_ERROR_INVALID_VALUE);
  if (!valid_device(dev)) return t(CUDA_ERROR_INVALID_DEVICE);
  std::snprintf(name, static_cast<size_t>(len), "NVIDIA H100 80GB HBM3 (softcuda)");
  return t(CUDA_SUCCESS);
}

SOFTCUDA_API CUresult cuDeviceGetPCIBusId(char* bus_id, int len, CUdevice dev) {
  Trace t("cuDeviceGetPCIBusId", "len=%d, dev=%d", len, dev);
  REQUIRE_INIT(t);
  if (bus_id == nullptr || len < 13) return t(CUDA_ERROR_INVALID_VALUE);
  if (!valid_device(dev)) return t(CUDA_ERROR_INVALID_DEVICE);
  PciId id = pci_id(dev);
  // The real driver spells the hex digits in upper case ("0000:3B:00.0").
  std::snprintf(bus_id, static_cast<size_t>(len), "%04X:%02X:%02X.%X", id.domain, id.bus, id.device,
                id.function);
  return t(CUDA_SUCCESS);
}

SOFTCUDA_API CUresult cuDeviceGetUuid_v2(CUuuid* uuid, CUdevice dev) {
  Trace t("cuDeviceGetUuid_v2", "dev=%d", dev);
  REQUIRE_INIT(t);
  if (uuid == nullptr) return t(CUDA_ERROR_INVALID_VALUE);
  if (!valid_device(dev)) return t(CUDA_ERROR_INVALID_DEVICE);
  static const char kPrefix[12] = {'s', 'o', 'f', 't', 'c', 'u', 'd', 'a', '-', 'g', 'p', 'u'};
  std::memcpy(uuid->bytes, kPrefix, sizeof(kPrefix));
  uint32_t d = static_cast<uint32_t>(dev);
  std::memcpy(uuid->bytes + 12, &d, sizeof(d));
  return t(CUDA_SUCCESS);
}

SOFTCUDA_API CUresult cuDeviceGetUuid(CUuuid* uuid, CUdevice dev) {
  return cuDeviceGetUuid_v2(uuid, dev);
}

SOFTCUDA_API CUresult cuDeviceTotalMem_v2(size_t* bytes, CUdevice dev) {
  Trace t("cuDeviceTotalMem_v2", "dev=%d", dev);
  REQUIRE_INIT(t);
  if (bytes == nullptr) return t(CUDA_ERROR_INVALID_VALUE);
  if (!valid_device(dev)) return t(CUDA_ERROR_INVALID_DEVICE);
  *bytes = size_t{80} << 30;
  return t(CUDA_SUCCESS);
}

SOFTCUDA_API CUresult cuDeviceTotalMem(size_t* bytes, CUdevice dev) {
  return cuDeviceTotalMem_v2(bytes, dev);
}

SOFTCUDA_API CUresult cuDeviceGetAttribute(int* value, CUdevice_attribute attrib, CUdevice dev) {
  Trace t("cuDeviceGetAttribute", "attrib=%d, dev=%d", static_cast<int>(attrib), dev);
  REQUIRE_INIT(t);
  if (value == nullptr) return t(CUDA_ERROR_INVALID_VALUE);
  if (!valid_device(dev)) return t(CUDA_ERROR_INVALID_DEVICE);
  const bool gdr = gdr_supported();
  int v = 0;
  switch (attrib) {
    case CU_DEVICE_ATTRIBUTE_PCI_BUS_ID:
      v = static_cast<int>(pci_id(dev).bus);
      break;
    case CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID:
      v = static_cast<int>(pci_id(dev).device);
      break;
    case CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID:
      v = static_cast<int>(pci_id(dev).domain);
      break;
    case CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_SUPPORTED:
      v = gdr ? 1 : 0;
      break;
    case CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_FLUSH_WRITES_OPTIONS:
      v = gdr ? CU_FLUSH_GPU_DIRECT_RDMA_WRITES_OPTION_HOST : 0;
      break;
    case CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WRITES_ORDERING:
      v = static_cast<int>(
          env_long("SOFTCUDA_RDMA_ORDERING", CU_GPU_DIRECT_RDMA_WRITES_ORDERING_NONE));
      break;
    case CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED:
      v = dmabuf_supported() ? 1 : 0;
      break;
    default: {
      const AttributeValue* fixed = fixed_attribute(attrib);
      if (fixed == nullptr) return t(CUDA_ERROR_INVALID_VALUE);
      v = fixed->value;
    }
  }
  *value = v;
  return t(CUDA_SUCCESS);
}

SOFTCUDA_API CUresult cuDeviceCanAccessPeer(int* can_access, CUdevice dev, CUdevice peer) {
  Trace t("cuDeviceCanAccessPeer", "dev=%d, peer=%d", dev, peer);
  REQUIRE_INIT(t);
  if (can_access == nullptr) return t(CUDA_ERROR_INVALID_VALUE);
  if (!valid_device(dev) || !valid_device(peer)) return t(CUDA_ERROR_INVALID_DEVICE);
  *can_access = (dev != peer && env_flag("SOFTCUDA_P2P", true)) ? 1 : 0;
  return t(CUDA_SUCCESS);
}
