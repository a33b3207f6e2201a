#include "core/cuda/cuda_driver.h"

#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cinttypes>
#include <cstdio>
#include <initializer_list>
#include <map>
#include <string_view>
#include <utility>

#include "weft/log.h"

namespace weft::cuda {
namespace {

// Boolean pointer attributes are written as a bool by some drivers and as an
// unsigned int by others. Read into a zeroed unsigned int, both give the same
// answer on a little-endian host.
static_assert(std::endian::native == std::endian::little);

// cuDriverGetVersion exists since CUDA 2.2: ask for it before knowing the
// driver's version (asking for a version newer than the driver fails).
constexpr int kDriverGetVersionSince = 2020;

// A dlopen handle, closed unless released. Only a library we give up on
// before cuInit is closed: unloading libcuda after it started is unsafe.
class DlHandle {
 public:
  explicit DlHandle(void* handle) : handle_(handle) {}
  ~DlHandle() {
    if (handle_ != nullptr) dlclose(handle_);
  }
  DlHandle(const DlHandle&) = delete;
  DlHandle& operator=(const DlHandle&) = delete;
  void* get() const { return handle_; }
  void* release() { return std::exchange(handle_, nullptr); }

 private:
  void* handle_;
};

// Sets *out to the concatenation of parts; never throws (called from behind a
// C ABI). Returns false so that error paths read `return set_error(...)`.
bool set_error(std::string* out, std::initializer_list<std::string_view> parts) noexcept {
  if (out == nullptr) return false;
  try {
    out->clear();
    for (std::string_view part : parts) out->append(part);
  } catch (...) {
    // Out of memory: an empty or partial message beats an exception.
  }
  return false;
}

// Looks entry points up by base name through cuGetProcAddress, which picks the
// ABI variant (cuMemAlloc -> cuMemAlloc_v2) for the CUDA version asked.
class Resolver {
 public:
  // The CUDA 12 form reports "not found" in a status out-parameter; the 11.3
  // form as an error.
  bool load(void* handle) {
    v2_ = reinterpret_cast<PFN_cuGetProcAddress_v2>(dlsym(handle, "cuGetProcAddress_v2"));
    if (v2_ == nullptr) {
      v1_ = reinterpret_cast<PFN_cuGetProcAddress_v1>(dlsym(handle, "cuGetProcAddress"));
    }
    return v2_ != nullptr || v1_ != nullptr;
  }

  template <typename F>
  bool find(const char* name, F* out, int version) const {
    void* pfn = nullptr;
    if (v2_ != nullptr) {
      CUdriverProcAddressQueryResult status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
      if (v2_(name, &pfn, version, CU_GET_PROC_ADDRESS_DEFAULT, &status) != CUDA_SUCCESS ||
          status != CU_GET_PROC_ADDRESS_SUCCESS) {
        pfn = nullptr;
      }
    } else if (v1_(name, &pfn, version, CU_GET_PROC_ADDRESS_DEFAULT) != CUDA_SUCCESS) {
      pfn = nullptr;
    }
    *out = reinterpret_cast<F>(pfn);
    return pfn != nullptr;
  }

 private:
  PFN_cuGetProcAddress_v2 v2_ = nullptr;
  PFN_cuGetProcAddress_v1 v1_ = nullptr;
};

CUdeviceptr device_pointer(const void* ptr) {
  return reinterpret_cast<uintptr_t>(ptr);
}

}  // namespace

// Makes a context current on the calling thread for one call. A thread with
// none gets the GPU's primary context and keeps it (as the CUDA runtime would
// leave it); a thread whose context belongs to another GPU than the call
// needs gets its own context back afterwards.
class Driver::ContextScope {
 public:
  explicit ContextScope(const Driver& driver) : driver_(driver) {}
  ~ContextScope() {
    if (restore_) driver_.api_.ctx_set_current(previous_);
  }
  ContextScope(const ContextScope&) = delete;
  ContextScope& operator=(const ContextScope&) = delete;

  // ordinal < 0: any context will do (GPU 0's primary one if there is none).
  // The caller checked that a non-negative ordinal names a device.
  bool enter(int ordinal, std::string* error) {
    const Api& api = driver_.api_;
    // Without the context entry points, the call itself reports a missing context.
    if (api.ctx_get_current == nullptr || api.ctx_set_current == nullptr) return true;
    CUcontext current = nullptr;
    if (CUresult rc = api.ctx_get_current(&current); rc != CUDA_SUCCESS) {
      return driver_.fail_call(error, "cuCtxGetCurrent", rc);
    }
    if (current != nullptr) {
      if (ordinal < 0 || api.ctx_get_device == nullptr) return true;
      CUdevice device = -1;
      if (api.ctx_get_device(&device) == CUDA_SUCCESS && device == driver_.devices_[ordinal]) {
        return true;
      }
    }
    CUcontext primary = nullptr;
    if (!driver_.primary_context(ordinal < 0 ? 0 : ordinal, &primary, error)) return false;
    if (CUresult rc = api.ctx_set_current(primary); rc != CUDA_SUCCESS) {
      return driver_.fail_call(error, "cuCtxSetCurrent", rc);
    }
    previous_ = current;
    restore_ = current != nullptr;
    return true;
  }

 private:
  const Driver& driver_;
  CUcontext previous_ = nullptr;
  bool restore_ = false;
};

std::unique_ptr<Driver> Driver::open(const std::string& library, std::string* reason) {
  std::string ignored;
  if (reason == nullptr) reason = &ignored;
  try {
    dlerror();
    DlHandle handle(dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL));
    if (handle.get() == nullptr) {
      const char* why = dlerror();
      *reason = library + " not found: " + (why != nullptr ? why : "dlopen failed");
      return nullptr;
    }
    Resolver resolver;
    if (!resolver.load(handle.get())) {
      *reason = library + " has no cuGetProcAddress: not a CUDA driver, or one older than 11.3";
      return nullptr;
    }

    std::unique_ptr<Driver> driver(new Driver());
    driver->library_ = library;
    Api& api = driver->api_;
    int version = kCudaVersion;
    if (resolver.find("cuDriverGetVersion", &api.driver_get_version, kDriverGetVersionSince)) {
      int found = 0;
      if (api.driver_get_version(&found) == CUDA_SUCCESS && found > 0) {
        driver->driver_version_ = found;
        version = std::min(version, found);
      }
    }

    const char* missing = nullptr;
    auto required = [&](const char* name, auto* slot) {
      if (!resolver.find(name, slot, version) && missing == nullptr) missing = name;
    };
    required("cuGetErrorName", &api.get_error_name);
    required("cuInit", &api.init);
    required("cuDeviceGetCount", &api.device_get_count);
    required("cuDeviceGet", &api.device_get);
    required("cuDeviceGetAttribute", &api.device_get_attribute);
    required("cuPointerGetAttribute", &api.pointer_get_attribute);
    if (missing != nullptr) {
      *reason = library + " lacks " + missing + " (not a CUDA driver, or too old)";
      return nullptr;
    }
    auto optional = [&](const char* name, auto* slot) { resolver.find(name, slot, version); };
    optional("cuPointerGetAttributes", &api.pointer_get_attributes);
    optional("cuPointerSetAttribute", &api.pointer_set_attribute);
    optional("cuMemGetHandleForAddressRange", &api.mem_get_handle_for_address_range);
    optional("cuFlushGPUDirectRDMAWrites", &api.flush_rdma_writes);
    optional("cuCtxGetCurrent", &api.ctx_get_current);
    optional("cuCtxSetCurrent", &api.ctx_set_current);
    optional("cuCtxGetDevice", &api.ctx_get_device);
    optional("cuDevicePrimaryCtxRetain", &api.primary_ctx_retain);
    optional("cuDevicePrimaryCtxRelease", &api.primary_ctx_release);
    optional("cuMemAlloc", &api.mem_alloc);
    optional("cuMemFree", &api.mem_free);
    optional("cuMemcpyHtoD", &api.memcpy_htod);
    optional("cuMemcpyDtoH", &api.memcpy_dtoh);

    // From cuInit on, libcuda stays loaded whatever happens.
    driver->handle_ = handle.release();
    if (CUresult rc = api.init(0); rc != CUDA_SUCCESS) {
      driver->fail_call(reason, "cuInit", rc,
                        rc == CUDA_ERROR_NO_DEVICE ? " (no CUDA device)" : "");
      return nullptr;
    }
    int count = 0;
    if (CUresult rc = api.device_get_count(&count); rc != CUDA_SUCCESS) {
      driver->fail_call(reason, "cuDeviceGetCount", rc);
      return nullptr;
    }
    if (count <= 0) {
      *reason = "no CUDA device";
      return nullptr;
    }
    driver->devices_.resize(count);
    for (int ordinal = 0; ordinal < count; ++ordinal) {
      if (CUresult rc = api.device_get(&driver->devices_[ordinal], ordinal); rc != CUDA_SUCCESS) {
        driver->fail_call(reason, "cuDeviceGet(" + std::to_string(ordinal) + ")", rc);
        return nullptr;
      }
    }
    driver->primary_.assign(count, nullptr);
    if (long page = sysconf(_SC_PAGESIZE); page > 0) driver->page_size_ = page;
    return driver;
  } catch (const std::exception& e) {
    set_error(reason, {"opening ", library, " failed: ", e.what()});
    return nullptr;
  }
}

const Driver* Driver::shared(const std::string& library) {
  try {
    // Never destroyed: libcuda stays loaded and the retained contexts with it
    // (NCCL may unload weft at exit while CUDA still runs).
    static std::mutex* const mutex = new std::mutex;
    static auto* const drivers = new std::map<std::string, std::unique_ptr<Driver>>;
    std::lock_guard<std::mutex> lock(*mutex);
    auto [entry, inserted] = drivers->try_emplace(library);
    if (inserted) {
      std::string reason;
      entry->second = open(library, &reason);
      if (entry->second == nullptr) {
        WEFT_INFO(NCCL_INIT, "GPU memory support off: %s; weft uses host memory only",
                  reason.c_str());
      } else {
        const Driver& driver = *entry->second;
        WEFT_INFO(NCCL_INIT, "CUDA driver %s, version %d, %d GPU(s)%s%s", library.c_str(),
                  driver.driver_version(), driver.device_count(),
                  driver.api_.mem_get_handle_for_address_range ? ", dma-buf export" : "",
                  driver.has_flush() ? ", cuFlushGPUDirectRDMAWrites" : "");
      }
    }
    return entry->second.get();
  } catch (const std::exception& e) {
    WEFT_WARN("opening the CUDA driver %s failed: %s", library.c_str(), e.what());
    return nullptr;
  }
}

Driver::~Driver() {
  // Only instances from open() get here (shared ones live for good). A
  // context we release must not stay current on this thread.
  if (api_.ctx_get_current != nullptr && api_.ctx_set_current != nullptr) {
    CUcontext current = nullptr;
    if (api_.ctx_get_current(&current) == CUDA_SUCCESS && current != nullptr &&
        std::find(primary_.begin(), primary_.end(), current) != primary_.end()) {
      api_.ctx_set_current(nullptr);
    }
  }
  if (api_.primary_ctx_release == nullptr) return;
  for (size_t ordinal = 0; ordinal < primary_.size(); ++ordinal) {
    if (primary_[ordinal] != nullptr) api_.primary_ctx_release(devices_[ordinal]);
  }
}

bool Driver::fail_call(std::string* error, std::string_view call, CUresult rc,
                       std::string_view hint) const {
  const char* name = nullptr;
  if (api_.get_error_name == nullptr || api_.get_error_name(rc, &name) != CUDA_SUCCESS ||
      name == nullptr) {
    char number[48];
    std::snprintf(number, sizeof(number), "CUDA error %d", static_cast<int>(rc));
    return set_error(error, {call, " failed: ", number, hint});
  }
  return set_error(error, {call, " failed: ", name, hint});
}

bool Driver::fail_missing(std::string* error, std::string_view call) const {
  return set_error(error, {call, " is not available in ", library_, " (CUDA driver too old?)"});
}

bool Driver::device_attribute(int ordinal, CUdevice_attribute attribute, int* value) const {
  if (ordinal < 0 || ordinal >= device_count()) return false;
  *value = 0;
  return api_.device_get_attribute(value, attribute, devices_[ordinal]) == CUDA_SUCCESS;
}

std::string Driver::pci_bus_id(int ordinal) const {
  int domain = 0;
  int bus = 0;
  int device = 0;
  if (!device_attribute(ordinal, CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID, &domain) ||
      !device_attribute(ordinal, CU_DEVICE_ATTRIBUTE_PCI_BUS_ID, &bus) ||
      !device_attribute(ordinal, CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID, &device)) {
    return {};
  }
  char text[32];
  std::snprintf(text, sizeof(text), "%04x:%02x:%02x.0", domain, bus, device);
  return text;
}

bool Driver::gdr_supported(int ordinal) const {
  int value = 0;
  return device_attribute(ordinal, CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_SUPPORTED, &value) &&
         value != 0;
}

bool Driver::dmabuf_supported(int ordinal) const {
  int value = 0;
  return api_.mem_get_handle_for_address_range != nullptr &&
         device_attribute(ordinal, CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED, &value) && value != 0;
}

int Driver::pointer_ordinal(const void* ptr) const {
  int ordinal = -1;
  if (api_.pointer_get_attribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
                                 device_pointer(ptr)) != CUDA_SUCCESS ||
      ordinal < 0 || ordinal >= device_count()) {
    return -1;
  }
  return ordinal;
}

bool Driver::primary_context(int ordinal, CUcontext* context, std::string* error) const {
  if (api_.primary_ctx_retain == nullptr) {
    return set_error(error, {"no CUDA context is current on this thread and "
                             "cuDevicePrimaryCtxRetain is not available in ",
                             library_});
  }
  try {
    std::lock_guard<std::mutex> lock(context_mutex_);
    CUcontext& slot = primary_[ordinal];
    if (slot == nullptr) {
      CUcontext retained = nullptr;
      if (CUresult rc = api_.primary_ctx_retain(&retained, devices_[ordinal]); rc != CUDA_SUCCESS) {
        return fail_call(error, "cuDevicePrimaryCtxRetain(GPU " + std::to_string(ordinal) + ")",
                         rc);
      }
      slot = retained;  // kept for the Driver's life
    }
    *context = slot;
    return true;
  } catch (const std::exception& e) {
    return set_error(error, {"retaining the primary CUDA context failed: ", e.what()});
  }
}

bool Driver::classify(const void* ptr, PointerInfo* info, std::string* error) const {
  *info = PointerInfo{};
  const CUdeviceptr p = device_pointer(ptr);
  unsigned int memory_type = 0;
  unsigned int managed = 0;
  int ordinal = -1;
  CUdeviceptr base = 0;
  size_t size = 0;
  unsigned long long buffer_id = 0;

  // One call when the driver has it: it answers "NULL" values, not an error,
  // for an address CUDA does not know.
  bool answered = false;
  if (api_.pointer_get_attributes != nullptr) {
    CUpointer_attribute attributes[] = {
        CU_POINTER_ATTRIBUTE_MEMORY_TYPE,    CU_POINTER_ATTRIBUTE_IS_MANAGED,
        CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR,
        CU_POINTER_ATTRIBUTE_RANGE_SIZE,     CU_POINTER_ATTRIBUTE_BUFFER_ID,
    };
    void* data[] = {&memory_type, &managed, &ordinal, &base, &size, &buffer_id};
    static_assert(std::size(attributes) == std::size(data));
    answered =
        api_.pointer_get_attributes(std::size(attributes), attributes, data, p) == CUDA_SUCCESS;
  }
  if (!answered) {
    // One attribute at a time (no cuPointerGetAttributes, or it refused one of
    // them). Here an address CUDA does not know is CUDA_ERROR_INVALID_VALUE.
    memory_type = 0;
    managed = 0;
    CUresult rc = api_.pointer_get_attribute(&memory_type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, p);
    if (rc == CUDA_ERROR_INVALID_VALUE) return true;
    if (rc != CUDA_SUCCESS) return fail_call(error, "cuPointerGetAttribute(MEMORY_TYPE)", rc);
    if (api_.pointer_get_attribute(&managed, CU_POINTER_ATTRIBUTE_IS_MANAGED, p) != CUDA_SUCCESS) {
      managed = 0;  // not every memory kind answers it; those are not managed
    }
  }
  // Unknown to CUDA (0) or pinned/registered host memory.
  if (managed == 0 && memory_type != CU_MEMORYTYPE_DEVICE && memory_type != CU_MEMORYTYPE_UNIFIED) {
    return true;
  }
  if (!answered) {
    struct Query {
      CUpointer_attribute attribute;
      void* data;
      const char* call;
    };
    const Query queries[] = {
        {CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, &ordinal, "cuPointerGetAttribute(DEVICE_ORDINAL)"},
        {CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, &base, "cuPointerGetAttribute(RANGE_START_ADDR)"},
        {CU_POINTER_ATTRIBUTE_RANGE_SIZE, &size, "cuPointerGetAttribute(RANGE_SIZE)"},
        {CU_POINTER_ATTRIBUTE_BUFFER_ID, &buffer_id, "cuPointerGetAttribute(BUFFER_ID)"},
    };
    for (const Query& query : queries) {
      if (CUresult rc = api_.pointer_get_attribute(query.data, query.attribute, p);
          rc != CUDA_SUCCESS) {
        return fail_call(error, query.call, rc);
      }
    }
  }
  info->device = true;
  info->managed = managed != 0;
  info->ordinal = ordinal;
  info->base = base;
  info->size = size;
  info->buffer_id = buffer_id;
  return true;
}

bool Driver::set_sync_memops(const void* ptr, std::string* error) const {
  if (api_.pointer_set_attribute == nullptr) return fail_missing(error, "cuPointerSetAttribute");
  const unsigned int one = 1;
  if (CUresult rc =
          api_.pointer_set_attribute(&one, CU_POINTER_ATTRIBUTE_SYNC_MEMOPS, device_pointer(ptr));
      rc != CUDA_SUCCESS) {
    return fail_call(error, "cuPointerSetAttribute(SYNC_MEMOPS)", rc);
  }
  return true;
}

bool Driver::export_dmabuf(const void* base, size_t size, int* fd, std::string* error) const {
  *fd = -1;
  if (api_.mem_get_handle_for_address_range == nullptr) {
    return fail_missing(error, "cuMemGetHandleForAddressRange");
  }
  const uintptr_t start = reinterpret_cast<uintptr_t>(base);
  char range[96];
  std::snprintf(range, sizeof(range), "[0x%" PRIxPTR ", +%zu)", start, size);
  // The driver wants host pages; say so rather than pass on its INVALID_VALUE.
  if (size == 0 || start % page_size_ != 0 || size % page_size_ != 0) {
    char page[32];
    std::snprintf(page, sizeof(page), "%zu", page_size_);
    return set_error(error,
                     {"cannot export a dma-buf for ", range,
                      ": start and size must be aligned to the page size (", page, " bytes)"});
  }
  PointerInfo info;
  if (!classify(base, &info, error)) return false;
  if (!info.device) {
    return set_error(error, {"cannot export a dma-buf for ", range, ": not CUDA device memory"});
  }
  // The driver backs whole pages, so the allocation's last partial page counts.
  const uintptr_t allocation_end =
      (info.base + info.size + page_size_ - 1) / page_size_ * page_size_;
  if (start < info.base || size > allocation_end - start) {
    char allocation[96];
    std::snprintf(allocation, sizeof(allocation), "[0x%" PRIxPTR ", +%zu)", info.base, info.size);
    return set_error(error, {"cannot export a dma-buf for ", range,
                             ": the range leaves its CUDA allocation ", allocation});
  }
  ContextScope scope(*this);
  if (!scope.enter(info.ordinal >= 0 && info.ordinal < device_count() ? info.ordinal : -1, error)) {
    return false;
  }
  int handle = -1;
  if (CUresult rc = api_.mem_get_handle_for_address_range(&handle, start, size,
                                                          CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, 0);
      rc != CUDA_SUCCESS) {
    return fail_call(error, "cuMemGetHandleForAddressRange(DMA_BUF_FD)", rc,
                     rc == CUDA_ERROR_NOT_SUPPORTED
                         ? " (no dma-buf support in this GPU, driver or kernel)"
                         : "");
  }
  *fd = handle;
  return true;
}

bool Driver::flush_rdma_writes(std::string* error) const {
  if (api_.flush_rdma_writes == nullptr) return fail_missing(error, "cuFlushGPUDirectRDMAWrites");
  ContextScope scope(*this);
  if (!scope.enter(-1, error)) return false;
  if (CUresult rc = api_.flush_rdma_writes(CU_FLUSH_GPU_DIRECT_RDMA_WRITES_TARGET_CURRENT_CTX,
                                           CU_FLUSH_GPU_DIRECT_RDMA_WRITES_TO_ALL_DEVICES);
      rc != CUDA_SUCCESS) {
    return fail_call(error, "cuFlushGPUDirectRDMAWrites", rc);
  }
  return true;
}

bool Driver::alloc(size_t size, int ordinal, void** out, std::string* error) const {
  *out = nullptr;
  if (api_.mem_alloc == nullptr) return fail_missing(error, "cuMemAlloc");
  char call[64];
  std::snprintf(call, sizeof(call), "cuMemAlloc(%zu bytes on GPU %d)", size, ordinal);
  if (ordinal < 0 || ordinal >= device_count()) {
    char count[32];
    std::snprintf(count, sizeof(count), "%d", device_count());
    return set_error(error, {call, " failed: no such GPU (", count, " visible)"});
  }
  ContextScope scope(*this);
  if (!scope.enter(ordinal, error)) return false;
  CUdeviceptr ptr = 0;
  if (CUresult rc = api_.mem_alloc(&ptr, size); rc != CUDA_SUCCESS) {
    return fail_call(error, call, rc);
  }
  *out = reinterpret_cast<void*>(static_cast<uintptr_t>(ptr));
  return true;
}

bool Driver::free(void* ptr, std::string* error) const {
  if (api_.mem_free == nullptr) return fail_missing(error, "cuMemFree");
  ContextScope scope(*this);
  if (!scope.enter(pointer_ordinal(ptr), error)) return false;
  if (CUresult rc = api_.mem_free(device_pointer(ptr)); rc != CUDA_SUCCESS) {
    return fail_call(error, "cuMemFree", rc);
  }
  return true;
}

bool Driver::copy_to_device(void* dst, const void* src, size_t size, std::string* error) const {
  if (api_.memcpy_htod == nullptr) return fail_missing(error, "cuMemcpyHtoD");
  ContextScope scope(*this);
  if (!scope.enter(pointer_ordinal(dst), error)) return false;
  if (CUresult rc = api_.memcpy_htod(device_pointer(dst), src, size); rc != CUDA_SUCCESS) {
    return fail_call(error, "cuMemcpyHtoD", rc);
  }
  return true;
}

bool Driver::copy_to_host(void* dst, const void* src, size_t size, std::string* error) const {
  if (api_.memcpy_dtoh == nullptr) return fail_missing(error, "cuMemcpyDtoH");
  ContextScope scope(*this);
  if (!scope.enter(pointer_ordinal(src), error)) return false;
  if (CUresult rc = api_.memcpy_dtoh(dst, device_pointer(src), size); rc != CUDA_SUCCESS) {
    return fail_call(error, "cuMemcpyDtoH", rc);
  }
  return true;
}

}  // namespace weft::cuda
