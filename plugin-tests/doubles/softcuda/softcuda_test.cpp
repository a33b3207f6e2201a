// softcuda.unit: the CUDA driver and runtime doubles behave as the real
// libraries do where weft and libfabric depend on it (error codes included).
// Loads both with dlopen from the softcuda build directory, like the code
// under test does.
#include "softcuda.h"

#include <dlfcn.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <csignal>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "cuda_abi.h"

#ifndef SOFTCUDA_DIR
#error "SOFTCUDA_DIR must name the softcuda build directory"
#endif

namespace {

void* must_dlopen(const std::string& path) {
  void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (h == nullptr) FAIL("dlopen " << path << ": " << dlerror());
  return h;
}

template <typename F>
F must_dlsym(void* lib, const char* name) {
  void* p = dlsym(lib, name);
  if (p == nullptr) FAIL("dlsym " << name << ": " << dlerror());
  return reinterpret_cast<F>(p);
}

#define SC_FN(lib, name) decltype(&::name) name = must_dlsym<decltype(&::name)>(lib, #name)

// The doubles, loaded once per process by path.
struct Api {
  void* cuda = must_dlopen(SOFTCUDA_DIR "/libcuda.so.1");
  void* cudart = must_dlopen(SOFTCUDA_DIR "/libcudart.so");

  SC_FN(cuda, cuInit);
  SC_FN(cuda, cuDriverGetVersion);
  SC_FN(cuda, cuGetErrorName);
  SC_FN(cuda, cuGetErrorString);
  SC_FN(cuda, cuDeviceGetCount);
  SC_FN(cuda, cuDeviceGet);
  SC_FN(cuda, cuDeviceGetAttribute);
  SC_FN(cuda, cuDeviceGetName);
  SC_FN(cuda, cuDeviceGetPCIBusId);
  SC_FN(cuda, cuDeviceCanAccessPeer);
  SC_FN(cuda, cuDevicePrimaryCtxRetain);
  SC_FN(cuda, cuDevicePrimaryCtxRelease_v2);
  SC_FN(cuda, cuCtxGetCurrent);
  SC_FN(cuda, cuCtxSetCurrent);
  SC_FN(cuda, cuCtxGetDevice);
  SC_FN(cuda, cuMemAlloc_v2);
  SC_FN(cuda, cuMemFree_v2);
  SC_FN(cuda, cuMemGetAddressRange_v2);
  SC_FN(cuda, cuMemcpy);
  SC_FN(cuda, cuMemcpyHtoD_v2);
  SC_FN(cuda, cuMemcpyDtoH_v2);
  SC_FN(cuda, cuMemsetD8_v2);
  SC_FN(cuda, cuPointerGetAttribute);
  SC_FN(cuda, cuPointerGetAttributes);
  SC_FN(cuda, cuPointerSetAttribute);
  SC_FN(cuda, cuMemGetHandleForAddressRange);
  SC_FN(cuda, cuFlushGPUDirectRDMAWrites);
  SC_FN(cuda, cuGetProcAddress_v2);
  SC_FN(cuda, cuGetProcAddress);

  SC_FN(cudart, cudaGetDeviceCount);
  SC_FN(cudart, cudaSetDevice);
  SC_FN(cudart, cudaGetDevice);
  SC_FN(cudart, cudaMalloc);
  SC_FN(cudart, cudaFree);
  SC_FN(cudart, cudaMemcpy);
  SC_FN(cudart, cudaMemset);
  SC_FN(cudart, cudaGetErrorName);
  SC_FN(cudart, cudaGetErrorString);
  SC_FN(cudart, cudaGetLastError);
  SC_FN(cudart, cudaHostRegister);
  SC_FN(cudart, cudaHostUnregister);
  SC_FN(cudart, cudaHostAlloc);
  SC_FN(cudart, cudaFreeHost);
  SC_FN(cudart, cudaPointerGetAttributes);
  SC_FN(cudart, cudaIpcGetMemHandle);
  SC_FN(cudart, cudaIpcOpenMemHandle);
  SC_FN(cudart, cudaIpcCloseMemHandle);
  SC_FN(cudart, cudaDeviceSynchronize);

  softcuda_present_fn present = must_dlsym<softcuda_present_fn>(cuda, "softcuda_present");
  softcuda_counter_fn flush_count = must_dlsym<softcuda_counter_fn>(cuda, "softcuda_flush_count");
  softcuda_counter_fn live_allocations =
      must_dlsym<softcuda_counter_fn>(cuda, "softcuda_live_allocations");
  softcuda_counter_fn dmabuf_exports =
      must_dlsym<softcuda_counter_fn>(cuda, "softcuda_dmabuf_exports");
  softcuda_counter_fn ipc_exports = must_dlsym<softcuda_counter_fn>(cuda, "softcuda_ipc_exports");
  softcuda_counter_fn ipc_opens = must_dlsym<softcuda_counter_fn>(cuda, "softcuda_ipc_opens");
  softcuda_counter_fn live_ipc_mappings =
      must_dlsym<softcuda_counter_fn>(cuda, "softcuda_live_ipc_mappings");
  softcuda_counter_fn memcpy_count = must_dlsym<softcuda_counter_fn>(cuda, "softcuda_memcpy_count");
  softcuda_counter_fn memcpy_bytes = must_dlsym<softcuda_counter_fn>(cuda, "softcuda_memcpy_bytes");
  softcuda_counter_fn live_host_registrations =
      must_dlsym<softcuda_counter_fn>(cuda, "softcuda_live_host_registrations");
  softcuda_reset_counters_fn reset_counters =
      must_dlsym<softcuda_reset_counters_fn>(cuda, "softcuda_reset_counters");
  softcuda_allocation_fd_fn allocation_fd =
      must_dlsym<softcuda_allocation_fd_fn>(cuda, "softcuda_allocation_fd");

  bool initialized = false;  // cuInit has been called (successfully) in this process
  CUcontext primary = nullptr;

  // cuInit and device 0's primary context current on the calling thread.
  CUcontext init() {
    REQUIRE(cuInit(0) == CUDA_SUCCESS);
    initialized = true;
    if (primary == nullptr) {  // one retain for the whole test program
      REQUIRE(cuDevicePrimaryCtxRetain(&primary, 0) == CUDA_SUCCESS);
    }
    REQUIRE(cuCtxSetCurrent(primary) == CUDA_SUCCESS);
    return primary;
  }
};

Api& api() {
  static Api a;
  return a;
}

// Sets an environment variable for one scope.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    const char* old = std::getenv(name);
    had_ = old != nullptr;
    if (had_) old_ = old;
    setenv(name, value, 1);
  }
  ~ScopedEnv() {
    if (had_) {
      setenv(name_, old_.c_str(), 1);
    } else {
      unsetenv(name_);
    }
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
  bool had_ = false;
  std::string old_;
};

const size_t kPage = static_cast<size_t>(sysconf(_SC_PAGESIZE));

}  // namespace

TEST_CASE("before cuInit: version, NOT_INITIALIZED, a machine without GPU", "[softcuda]") {
  Api& a = api();
  REQUIRE(a.present() == 1);
  int version = 0;
  REQUIRE(a.cuDriverGetVersion(&version) == CUDA_SUCCESS);
  CHECK(version == 13000);
  {
    ScopedEnv env("SOFTCUDA_DRIVER_VERSION", "12080");
    REQUIRE(a.cuDriverGetVersion(&version) == CUDA_SUCCESS);
    CHECK(version == 12080);
  }
  if (!a.initialized) {
    int count = -1;
    CHECK(a.cuDeviceGetCount(&count) == CUDA_ERROR_NOT_INITIALIZED);
    unsigned type = 0;
    int host = 0;
    CHECK(a.cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                                  reinterpret_cast<CUdeviceptr>(&host)) ==
          CUDA_ERROR_NOT_INITIALIZED);
    {
      ScopedEnv none("SOFTCUDA_DEVICES", "0");
      CHECK(a.cuInit(0) == CUDA_ERROR_NO_DEVICE);
      count = -1;
      CHECK(a.cudaGetDeviceCount(&count) == cudaErrorNoDevice);
      CHECK(count == 0);
      CHECK(a.cuDeviceGetCount(&count) == CUDA_ERROR_NOT_INITIALIZED);
    }
  }
  CHECK(a.cuInit(1) == CUDA_ERROR_INVALID_VALUE);
  a.init();
  int count = 0;
  REQUIRE(a.cuDeviceGetCount(&count) == CUDA_SUCCESS);
  CHECK(count == 1);
  ScopedEnv three("SOFTCUDA_DEVICES", "3");
  REQUIRE(a.cuDeviceGetCount(&count) == CUDA_SUCCESS);
  CHECK(count == 3);
}

TEST_CASE("device queries and error strings", "[softcuda]") {
  Api& a = api();
  a.init();
  CUdevice dev = -1;
  REQUIRE(a.cuDeviceGet(&dev, 0) == CUDA_SUCCESS);
  CHECK(dev == 0);
  CHECK(a.cuDeviceGet(&dev, 1) == CUDA_ERROR_INVALID_DEVICE);

  int v = -1;
  REQUIRE(a.cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_SUPPORTED, 0) ==
          CUDA_SUCCESS);
  CHECK(v == 1);
  REQUIRE(a.cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED, 0) == CUDA_SUCCESS);
  CHECK(v == 1);
  {
    ScopedEnv gdr("SOFTCUDA_GDR", "0");
    ScopedEnv dmabuf("SOFTCUDA_DMABUF", "0");
    REQUIRE(a.cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_SUPPORTED, 0) ==
            CUDA_SUCCESS);
    CHECK(v == 0);
    REQUIRE(a.cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED, 0) == CUDA_SUCCESS);
    CHECK(v == 0);
  }
  REQUIRE(a.cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, 0) ==
          CUDA_SUCCESS);
  CHECK(v == 9);
  REQUIRE(a.cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, 0) ==
          CUDA_SUCCESS);
  CHECK(v == 0);
  REQUIRE(a.cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_PCI_BUS_ID, 0) == CUDA_SUCCESS);
  CHECK(v == 0x18);
  CHECK(a.cuDeviceGetAttribute(&v, static_cast<CUdevice_attribute>(9999), 0) ==
        CUDA_ERROR_INVALID_VALUE);
  CHECK(a.cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED, 5) ==
        CUDA_ERROR_INVALID_DEVICE);

  char name[64] = {};
  REQUIRE(a.cuDeviceGetName(name, sizeof(name), 0) == CUDA_SUCCESS);
  CHECK(std::string(name).find("softcuda") != std::string::npos);
  char bus[32] = {};
  REQUIRE(a.cuDeviceGetPCIBusId(bus, sizeof(bus), 0) == CUDA_SUCCESS);
  CHECK(std::string(bus) == "0000:18:00.0");
  {
    ScopedEnv two("SOFTCUDA_DEVICES", "2");
    ScopedEnv ids("SOFTCUDA_PCI_BUS_IDS", "0000:3b:00.0,0001:af:00.0");
    REQUIRE(a.cuDeviceGetPCIBusId(bus, sizeof(bus), 1) == CUDA_SUCCESS);
    CHECK(std::string(bus) == "0001:AF:00.0");
    int can = -1;
    REQUIRE(a.cuDeviceCanAccessPeer(&can, 0, 1) == CUDA_SUCCESS);
    CHECK(can == 1);
    ScopedEnv p2p("SOFTCUDA_P2P", "0");
    REQUIRE(a.cuDeviceCanAccessPeer(&can, 0, 1) == CUDA_SUCCESS);
    CHECK(can == 0);
  }

  const char* s = nullptr;
  REQUIRE(a.cuGetErrorName(CUDA_ERROR_NOT_SUPPORTED, &s) == CUDA_SUCCESS);
  CHECK(std::string(s) == "CUDA_ERROR_NOT_SUPPORTED");
  REQUIRE(a.cuGetErrorString(CUDA_ERROR_INVALID_VALUE, &s) == CUDA_SUCCESS);
  CHECK(std::string(s) == "invalid argument");
  CHECK(a.cuGetErrorName(static_cast<CUresult>(12345), &s) == CUDA_ERROR_INVALID_VALUE);
  CHECK(s == nullptr);
  CHECK(std::string(a.cudaGetErrorName(cudaErrorNoDevice)) == "cudaErrorNoDevice");
  CHECK(std::string(a.cudaGetErrorString(cudaErrorMemoryAllocation)) == "out of memory");
}

TEST_CASE("contexts: current per thread, required to allocate", "[softcuda]") {
  Api& a = api();
  CUcontext ctx = a.init();
  CUcontext cur = nullptr;
  REQUIRE(a.cuCtxGetCurrent(&cur) == CUDA_SUCCESS);
  CHECK(cur == ctx);
  CUdevice dev = -1;
  REQUIRE(a.cuCtxGetDevice(&dev) == CUDA_SUCCESS);
  CHECK(dev == 0);

  CUresult in_thread_alloc = CUDA_SUCCESS;
  CUresult in_thread_getdev = CUDA_SUCCESS;
  CUcontext in_thread_ctx = ctx;
  std::thread([&] {
    CUdeviceptr d = 0;
    a.cuCtxGetCurrent(&in_thread_ctx);
    in_thread_alloc = a.cuMemAlloc_v2(&d, 64);
    CUdevice x = 0;
    in_thread_getdev = a.cuCtxGetDevice(&x);
  }).join();
  CHECK(in_thread_ctx == nullptr);
  CHECK(in_thread_alloc == CUDA_ERROR_INVALID_CONTEXT);
  CHECK(in_thread_getdev == CUDA_ERROR_INVALID_CONTEXT);
}

TEST_CASE("cuMemAlloc / cuMemFree and pointer attributes", "[softcuda]") {
  Api& a = api();
  CUcontext ctx = a.init();
  const auto live = a.live_allocations();
  CUdeviceptr d = 0;
  CHECK(a.cuMemAlloc_v2(&d, 0) == CUDA_ERROR_INVALID_VALUE);
  REQUIRE(a.cuMemAlloc_v2(&d, 10000) == CUDA_SUCCESS);
  REQUIRE(d != 0);
  CHECK(d % kPage == 0);
  CHECK(a.live_allocations() == live + 1);
  CHECK(a.allocation_fd(d + 100) >= 0);

  for (CUdeviceptr p : {d, d + 1234}) {
    unsigned type = 0;
    REQUIRE(a.cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, p) == CUDA_SUCCESS);
    CHECK(type == CU_MEMORYTYPE_DEVICE);
    int ordinal = -1;
    REQUIRE(a.cuPointerGetAttribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, p) ==
            CUDA_SUCCESS);
    CHECK(ordinal == 0);
    CUdeviceptr start = 0;
    REQUIRE(a.cuPointerGetAttribute(&start, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, p) ==
            CUDA_SUCCESS);
    CHECK(start == d);
    size_t size = 0;
    REQUIRE(a.cuPointerGetAttribute(&size, CU_POINTER_ATTRIBUTE_RANGE_SIZE, p) == CUDA_SUCCESS);
    CHECK(size == 10000);
    unsigned managed = 7;
    REQUIRE(a.cuPointerGetAttribute(&managed, CU_POINTER_ATTRIBUTE_IS_MANAGED, p) == CUDA_SUCCESS);
    CHECK(managed == 0);
    CUdeviceptr devptr = 0;
    REQUIRE(a.cuPointerGetAttribute(&devptr, CU_POINTER_ATTRIBUTE_DEVICE_POINTER, p) ==
            CUDA_SUCCESS);
    CHECK(devptr == p);
    CUcontext owner = nullptr;
    REQUIRE(a.cuPointerGetAttribute(&owner, CU_POINTER_ATTRIBUTE_CONTEXT, p) == CUDA_SUCCESS);
    CHECK(owner == ctx);
    void* host = nullptr;
    CHECK(a.cuPointerGetAttribute(&host, CU_POINTER_ATTRIBUTE_HOST_POINTER, p) ==
          CUDA_ERROR_INVALID_VALUE);
  }
  CUdeviceptr base = 0;
  size_t size = 0;
  REQUIRE(a.cuMemGetAddressRange_v2(&base, &size, d + 9999) == CUDA_SUCCESS);
  CHECK(base == d);
  CHECK(size == 10000);

  // Buffer ids are unique per allocation, never reused.
  CUdeviceptr d2 = 0;
  REQUIRE(a.cuMemAlloc_v2(&d2, 1) == CUDA_SUCCESS);
  unsigned long long id1 = 0, id2 = 0;
  REQUIRE(a.cuPointerGetAttribute(&id1, CU_POINTER_ATTRIBUTE_BUFFER_ID, d) == CUDA_SUCCESS);
  REQUIRE(a.cuPointerGetAttribute(&id2, CU_POINTER_ATTRIBUTE_BUFFER_ID, d2) == CUDA_SUCCESS);
  CHECK(id1 != 0);
  CHECK(id1 != id2);

  // libfabric's cuda_is_addr_valid query.
  unsigned mem_type = 0, is_managed = 1;
  int device_ord = -1;
  CUpointer_attribute attrs[] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_IS_MANAGED,
                                 CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL};
  void* data[] = {&mem_type, &is_managed, &device_ord};
  REQUIRE(a.cuPointerGetAttributes(3, attrs, data, d + 5) == CUDA_SUCCESS);
  CHECK(mem_type == CU_MEMORYTYPE_DEVICE);
  CHECK(is_managed == 0);
  CHECK(device_ord == 0);

  // Plain host memory: cuPointerGetAttribute fails with INVALID_VALUE,
  // cuPointerGetAttributes succeeds with "NULL" values.
  std::vector<char> heap(4096);
  auto h = reinterpret_cast<CUdeviceptr>(heap.data());
  unsigned type = 99;
  CHECK(a.cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, h) ==
        CUDA_ERROR_INVALID_VALUE);
  CUcontext owner = nullptr;
  CHECK(a.cuPointerGetAttribute(&owner, CU_POINTER_ATTRIBUTE_CONTEXT, h) ==
        CUDA_ERROR_INVALID_VALUE);
  mem_type = 99;
  REQUIRE(a.cuPointerGetAttributes(3, attrs, data, h) == CUDA_SUCCESS);
  CHECK(mem_type == 0);
  CHECK(a.cuMemGetAddressRange_v2(&base, &size, h) == CUDA_ERROR_NOT_FOUND);
  // Just past the requested size is not part of the allocation.
  CHECK(a.cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, d + 10000) ==
        CUDA_ERROR_INVALID_VALUE);

  CHECK(a.cuMemFree_v2(d + 8) == CUDA_ERROR_INVALID_VALUE);
  REQUIRE(a.cuMemFree_v2(d) == CUDA_SUCCESS);
  CHECK(a.cuMemFree_v2(d) == CUDA_ERROR_INVALID_VALUE);
  REQUIRE(a.cuMemFree_v2(d2) == CUDA_SUCCESS);
  CHECK(a.live_allocations() == live);
  CHECK(a.allocation_fd(d) == -1);
}

TEST_CASE("CU_POINTER_ATTRIBUTE_SYNC_MEMOPS is recorded", "[softcuda]") {
  Api& a = api();
  a.init();
  CUdeviceptr d = 0;
  REQUIRE(a.cuMemAlloc_v2(&d, 4096) == CUDA_SUCCESS);
  unsigned flag = 7;
  REQUIRE(a.cuPointerGetAttribute(&flag, CU_POINTER_ATTRIBUTE_SYNC_MEMOPS, d) == CUDA_SUCCESS);
  CHECK(flag == 0);
  int on = 1;
  REQUIRE(a.cuPointerSetAttribute(&on, CU_POINTER_ATTRIBUTE_SYNC_MEMOPS, d + 17) == CUDA_SUCCESS);
  REQUIRE(a.cuPointerGetAttribute(&flag, CU_POINTER_ATTRIBUTE_SYNC_MEMOPS, d) == CUDA_SUCCESS);
  CHECK(flag == 1);
  CHECK(a.cuPointerSetAttribute(&on, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, d) ==
        CUDA_ERROR_INVALID_VALUE);
  int host = 0;
  CHECK(a.cuPointerSetAttribute(&on, CU_POINTER_ATTRIBUTE_SYNC_MEMOPS,
                                reinterpret_cast<CUdeviceptr>(&host)) == CUDA_ERROR_INVALID_VALUE);
  {
    // What a real driver answers for memory mapped with cuMemCreate.
    ScopedEnv refuse("SOFTCUDA_SYNC_MEMOPS", "0");
    CHECK(a.cuPointerSetAttribute(&on, CU_POINTER_ATTRIBUTE_SYNC_MEMOPS, d) ==
          CUDA_ERROR_NOT_SUPPORTED);
  }
  REQUIRE(a.cuMemFree_v2(d) == CUDA_SUCCESS);
}

TEST_CASE("driver copies and memset stay inside allocations", "[softcuda]") {
  Api& a = api();
  a.init();
  a.reset_counters();
  CUdeviceptr d = 0;
  REQUIRE(a.cuMemAlloc_v2(&d, 256) == CUDA_SUCCESS);
  std::vector<unsigned char> in(256), out(256, 0);
  for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<unsigned char>(i * 7);
  REQUIRE(a.cuMemcpyHtoD_v2(d, in.data(), in.size()) == CUDA_SUCCESS);
  REQUIRE(a.cuMemcpyDtoH_v2(out.data(), d, out.size()) == CUDA_SUCCESS);
  CHECK(in == out);
  CHECK(a.memcpy_count() == 2);
  CHECK(a.memcpy_bytes() == 512);
  CHECK(a.cuMemcpyHtoD_v2(d + 1, in.data(), 256) == CUDA_ERROR_INVALID_VALUE);
  CHECK(a.cuMemcpyHtoD_v2(reinterpret_cast<CUdeviceptr>(out.data()), in.data(), 16) ==
        CUDA_ERROR_INVALID_VALUE);
  REQUIRE(a.cuMemsetD8_v2(d + 16, 0xab, 32) == CUDA_SUCCESS);
  REQUIRE(a.cuMemcpy(reinterpret_cast<CUdeviceptr>(out.data()), d, 256) == CUDA_SUCCESS);
  CHECK(out[15] == in[15]);
  CHECK(out[16] == 0xab);
  CHECK(out[47] == 0xab);
  CHECK(out[48] == in[48]);
  REQUIRE(a.cuMemFree_v2(d) == CUDA_SUCCESS);
}

TEST_CASE("dma-buf export: the fd maps the allocation's bytes", "[softcuda]") {
  Api& a = api();
  a.init();
  a.reset_counters();
  const size_t size = 3 * kPage + 100;  // the export covers whole pages
  const size_t pages = 4 * kPage;
  CUdeviceptr d = 0;
  REQUIRE(a.cuMemAlloc_v2(&d, size) == CUDA_SUCCESS);
  std::vector<unsigned char> pattern(size);
  for (size_t i = 0; i < size; ++i) pattern[i] = static_cast<unsigned char>(i % 251);
  REQUIRE(a.cuMemcpyHtoD_v2(d, pattern.data(), size) == CUDA_SUCCESS);

  int fd1 = -1, fd2 = -1;
  REQUIRE(a.cuMemGetHandleForAddressRange(&fd1, d, pages, CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, 0) ==
          CUDA_SUCCESS);
  REQUIRE(a.cuMemGetHandleForAddressRange(&fd2, d, pages, CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD,
                                          CU_MEM_RANGE_FLAG_DMA_BUF_MAPPING_TYPE_PCIE) ==
          CUDA_SUCCESS);
  CHECK(fd1 >= 0);
  CHECK(fd2 >= 0);
  CHECK(fd1 != fd2);  // a new fd each call
  CHECK(a.dmabuf_exports() == 2);

  void* m = mmap(nullptr, pages, PROT_READ | PROT_WRITE, MAP_SHARED, fd1, 0);
  REQUIRE(m != MAP_FAILED);
  CHECK(std::memcmp(m, pattern.data(), size) == 0);
  // And the other way: a write through the fd is seen through the device pointer.
  static_cast<unsigned char*>(m)[42] = 0x5a;
  unsigned char back = 0;
  REQUIRE(a.cuMemcpyDtoH_v2(&back, d + 42, 1) == CUDA_SUCCESS);
  CHECK(back == 0x5a);
  munmap(m, pages);
  close(fd1);
  close(fd2);

  int fd = -1;
  // dptr and size must be host-page aligned, the range inside one allocation.
  CHECK(a.cuMemGetHandleForAddressRange(&fd, d + 64, kPage, CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD,
                                        0) == CUDA_ERROR_INVALID_VALUE);
  CHECK(a.cuMemGetHandleForAddressRange(&fd, d, size, CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, 0) ==
        CUDA_ERROR_INVALID_VALUE);
  CHECK(a.cuMemGetHandleForAddressRange(&fd, d, pages + kPage, CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD,
                                        0) == CUDA_ERROR_INVALID_VALUE);
  CHECK(a.cuMemGetHandleForAddressRange(&fd, d, pages, static_cast<CUmemRangeHandleType>(2), 0) ==
        CUDA_ERROR_INVALID_VALUE);
  CHECK(a.cuMemGetHandleForAddressRange(&fd, d, pages, CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, 4) ==
        CUDA_ERROR_INVALID_VALUE);
  void* host = mmap(nullptr, kPage, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  REQUIRE(host != MAP_FAILED);
  CHECK(a.cuMemGetHandleForAddressRange(&fd, reinterpret_cast<CUdeviceptr>(host), kPage,
                                        CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD,
                                        0) == CUDA_ERROR_INVALID_VALUE);
  munmap(host, kPage);
  // A sub-range of whole pages is fine.
  REQUIRE(a.cuMemGetHandleForAddressRange(&fd, d + kPage, kPage,
                                          CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, 0) == CUDA_SUCCESS);
  close(fd);
  {
    ScopedEnv old_driver("SOFTCUDA_DMABUF_PCIE", "0");
    CHECK(a.cuMemGetHandleForAddressRange(&fd, d, pages, CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD,
                                          CU_MEM_RANGE_FLAG_DMA_BUF_MAPPING_TYPE_PCIE) ==
          CUDA_ERROR_NOT_SUPPORTED);
  }
  {
    ScopedEnv off("SOFTCUDA_DMABUF", "0");
    CHECK(a.cuMemGetHandleForAddressRange(&fd, d, pages, CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, 0) ==
          CUDA_ERROR_NOT_SUPPORTED);
  }
  CHECK(a.dmabuf_exports() == 3);
  REQUIRE(a.cuMemFree_v2(d) == CUDA_SUCCESS);
}

TEST_CASE("cuFlushGPUDirectRDMAWrites is counted", "[softcuda]") {
  Api& a = api();
  a.init();
  a.reset_counters();
  CHECK(a.flush_count() == 0);
  REQUIRE(a.cuFlushGPUDirectRDMAWrites(CU_FLUSH_GPU_DIRECT_RDMA_WRITES_TARGET_CURRENT_CTX,
                                       CU_FLUSH_GPU_DIRECT_RDMA_WRITES_TO_OWNER) == CUDA_SUCCESS);
  REQUIRE(a.cuFlushGPUDirectRDMAWrites(CU_FLUSH_GPU_DIRECT_RDMA_WRITES_TARGET_CURRENT_CTX,
                                       CU_FLUSH_GPU_DIRECT_RDMA_WRITES_TO_ALL_DEVICES) ==
          CUDA_SUCCESS);
  CHECK(a.flush_count() == 2);
  CHECK(a.cuFlushGPUDirectRDMAWrites(CU_FLUSH_GPU_DIRECT_RDMA_WRITES_TARGET_CURRENT_CTX,
                                     static_cast<CUflushGPUDirectRDMAWritesScope>(5)) ==
        CUDA_ERROR_INVALID_VALUE);
  CUresult no_ctx = CUDA_SUCCESS;
  std::thread([&] {
    no_ctx = a.cuFlushGPUDirectRDMAWrites(CU_FLUSH_GPU_DIRECT_RDMA_WRITES_TARGET_CURRENT_CTX,
                                          CU_FLUSH_GPU_DIRECT_RDMA_WRITES_TO_OWNER);
  }).join();
  CHECK(no_ctx == CUDA_ERROR_INVALID_CONTEXT);
  CHECK(a.flush_count() == 2);
  a.reset_counters();
  CHECK(a.flush_count() == 0);
}

TEST_CASE("cuGetProcAddress resolves base names", "[softcuda]") {
  Api& a = api();
  void* fn = nullptr;
  CUdriverProcAddressQueryResult status = CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT;
  REQUIRE(a.cuGetProcAddress_v2("cuMemAlloc", &fn, 12000, CU_GET_PROC_ADDRESS_DEFAULT, &status) ==
          CUDA_SUCCESS);
  CHECK(status == CU_GET_PROC_ADDRESS_SUCCESS);
  CHECK(fn == dlsym(a.cuda, "cuMemAlloc_v2"));
  for (const char* name :
       {"cuPointerGetAttribute", "cuPointerGetAttributes", "cuMemGetHandleForAddressRange",
        "cuFlushGPUDirectRDMAWrites", "cuInit", "cuGetProcAddress", "cuDevicePrimaryCtxRelease"}) {
    fn = nullptr;
    REQUIRE(a.cuGetProcAddress_v2(name, &fn, 13000, CU_GET_PROC_ADDRESS_DEFAULT, &status) ==
            CUDA_SUCCESS);
    CHECK(status == CU_GET_PROC_ADDRESS_SUCCESS);
    CHECK(fn != nullptr);
  }
  fn = &status;
  REQUIRE(a.cuGetProcAddress_v2("cuNoSuchFunction", &fn, 13000, 0, &status) == CUDA_SUCCESS);
  CHECK(status == CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
  CHECK(fn == nullptr);
  REQUIRE(a.cuGetProcAddress_v2("cuMemGetHandleForAddressRange", &fn, 11000, 0, &status) ==
          CUDA_SUCCESS);
  CHECK(status == CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
  CHECK(fn == nullptr);
  CHECK(a.cuGetProcAddress_v2("cuInit", &fn, 13010, 0, &status) == CUDA_ERROR_INVALID_VALUE);
  // The CUDA 11.3 signature.
  REQUIRE(a.cuGetProcAddress("cuFlushGPUDirectRDMAWrites", &fn, 12000, 0) == CUDA_SUCCESS);
  CHECK(fn == dlsym(a.cuda, "cuFlushGPUDirectRDMAWrites"));
  CHECK(a.cuGetProcAddress("cuNoSuchFunction", &fn, 12000, 0) == CUDA_ERROR_NOT_FOUND);
}

TEST_CASE("cudart: malloc, memcpy round trip, kinds, host registration", "[softcuda]") {
  Api& a = api();
  a.init();
  int count = 0;
  REQUIRE(a.cudaGetDeviceCount(&count) == cudaSuccess);
  CHECK(count == 1);
  CHECK(a.cudaSetDevice(1) == cudaErrorInvalidDevice);
  REQUIRE(a.cudaSetDevice(0) == cudaSuccess);
  int dev = -1;
  REQUIRE(a.cudaGetDevice(&dev) == cudaSuccess);
  CHECK(dev == 0);

  void* d = nullptr;
  REQUIRE(a.cudaMalloc(&d, 1000) == cudaSuccess);
  unsigned type = 0;
  REQUIRE(a.cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                                  reinterpret_cast<CUdeviceptr>(d)) == CUDA_SUCCESS);
  CHECK(type == CU_MEMORYTYPE_DEVICE);

  std::vector<char> in(1000), out(1000, 0);
  for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<char>(i * 13);
  REQUIRE(a.cudaMemcpy(d, in.data(), in.size(), cudaMemcpyHostToDevice) == cudaSuccess);
  REQUIRE(a.cudaMemcpy(out.data(), d, out.size(), cudaMemcpyDeviceToHost) == cudaSuccess);
  CHECK(in == out);
  std::fill(out.begin(), out.end(), 0);
  REQUIRE(a.cudaMemcpy(out.data(), d, out.size(), cudaMemcpyDefault) == cudaSuccess);
  CHECK(in == out);
  CHECK(a.cudaMemcpy(out.data(), d, 10, cudaMemcpyHostToDevice) == cudaErrorInvalidValue);
  CHECK(a.cudaGetLastError() == cudaErrorInvalidValue);
  CHECK(a.cudaGetLastError() == cudaSuccess);
  CHECK(a.cudaMemcpy(d, in.data(), 10, static_cast<cudaMemcpyKind>(7)) ==
        cudaErrorInvalidMemcpyDirection);
  CHECK(a.cudaMemcpy(d, in.data(), 1001, cudaMemcpyHostToDevice) == cudaErrorInvalidValue);
  REQUIRE(a.cudaMemset(d, 0, 1000) == cudaSuccess);
  REQUIRE(a.cudaMemcpy(out.data(), d, 4, cudaMemcpyDeviceToHost) == cudaSuccess);
  CHECK(out[0] == 0);

  cudaPointerAttributes attrs{};
  REQUIRE(a.cudaPointerGetAttributes(&attrs, d) == cudaSuccess);
  CHECK(attrs.type == cudaMemoryTypeDevice);
  CHECK(attrs.device == 0);
  REQUIRE(a.cudaPointerGetAttributes(&attrs, in.data()) == cudaSuccess);
  CHECK(attrs.type == cudaMemoryTypeUnregistered);

  REQUIRE(a.cudaFree(d) == cudaSuccess);
  CHECK(a.cudaFree(d) == cudaErrorInvalidValue);
  CHECK(a.cudaFree(nullptr) == cudaSuccess);

  // cudaHostRegister: host memory the driver knows, as CU_MEMORYTYPE_HOST.
  const auto regs = a.live_host_registrations();
  std::vector<char> host(8192);
  REQUIRE(a.cudaHostRegister(host.data(), host.size(), cudaHostRegisterDefault) == cudaSuccess);
  CHECK(a.live_host_registrations() == regs + 1);
  REQUIRE(a.cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                                  reinterpret_cast<CUdeviceptr>(host.data() + 100)) ==
          CUDA_SUCCESS);
  CHECK(type == CU_MEMORYTYPE_HOST);
  CHECK(a.cudaHostRegister(host.data() + 64, 64, cudaHostRegisterDefault) ==
        cudaErrorHostMemoryAlreadyRegistered);
  REQUIRE(a.cudaHostUnregister(host.data()) == cudaSuccess);
  CHECK(a.cudaHostUnregister(host.data()) == cudaErrorHostMemoryNotRegistered);
  CHECK(a.live_host_registrations() == regs);

  void* pinned = nullptr;
  REQUIRE(a.cudaHostAlloc(&pinned, 100, cudaHostAllocDefault) == cudaSuccess);
  std::memset(pinned, 1, 100);
  REQUIRE(a.cudaPointerGetAttributes(&attrs, pinned) == cudaSuccess);
  CHECK(attrs.type == cudaMemoryTypeHost);
  REQUIRE(a.cudaFreeHost(pinned) == cudaSuccess);
  REQUIRE(a.cudaDeviceSynchronize() == cudaSuccess);
}

TEST_CASE("cudart IPC: another process opens the allocation", "[softcuda]") {
  Api& a = api();
  a.init();
  a.reset_counters();
  const size_t size = 2 * kPage;
  void* d = nullptr;
  REQUIRE(a.cudaMalloc(&d, size) == cudaSuccess);
  std::vector<char> first(kPage, 'p');
  REQUIRE(a.cudaMemcpy(d, first.data(), kPage, cudaMemcpyHostToDevice) == cudaSuccess);
  cudaIpcMemHandle_t handle{};
  REQUIRE(a.cudaIpcGetMemHandle(&handle, d) == cudaSuccess);
  CHECK(a.ipc_exports() == 1);

  // Not in the exporting process, as with the real driver...
  void* same = nullptr;
  CHECK(a.cudaIpcOpenMemHandle(&same, handle, cudaIpcMemLazyEnablePeerAccess) ==
        cudaErrorDeviceUninitialized);
  CHECK(a.cudaIpcOpenMemHandle(&same, handle, 0) == cudaErrorInvalidValue);
  int host = 0;
  cudaIpcMemHandle_t bad{};
  CHECK(a.cudaIpcGetMemHandle(&bad, &host) == cudaErrorInvalidValue);

  // ... but in a child: it sees the parent's bytes, and the parent its own.
  int to_parent[2], to_child[2];
  REQUIRE(pipe(to_parent) == 0);
  REQUIRE(pipe(to_child) == 0);
  pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    int rc = 0;
    char* mapped = nullptr;
    std::vector<char> buf(kPage);
    if (a.cudaIpcOpenMemHandle(reinterpret_cast<void**>(&mapped), handle,
                               cudaIpcMemLazyEnablePeerAccess) != cudaSuccess) {
      _exit(10);
    }
    if (mapped == d) rc = 11;  // a new mapping, not the inherited one
    if (a.cudaMemcpy(buf.data(), mapped, kPage, cudaMemcpyDeviceToHost) != cudaSuccess ||
        buf != std::vector<char>(kPage, 'p')) {
      rc = 12;
    }
    std::vector<char> second(kPage, 'c');
    if (a.cudaMemcpy(mapped + kPage, second.data(), kPage, cudaMemcpyHostToDevice) != cudaSuccess) {
      rc = 13;
    }
    char token = 'x';
    if (write(to_parent[1], &token, 1) != 1 || read(to_child[0], &token, 1) != 1) rc = 14;
    if (a.cudaMemcpy(buf.data(), mapped, kPage, cudaMemcpyDeviceToHost) != cudaSuccess ||
        buf != std::vector<char>(kPage, 'q')) {
      rc = 15;
    }
    if (a.cudaIpcCloseMemHandle(mapped) != cudaSuccess) rc = 16;
    if (a.cudaIpcCloseMemHandle(mapped) != cudaErrorInvalidValue) rc = 17;
    _exit(rc);
  }
  char token = 0;
  REQUIRE(read(to_parent[0], &token, 1) == 1);
  std::vector<char> buf(kPage);
  REQUIRE(a.cudaMemcpy(buf.data(), static_cast<char*>(d) + kPage, kPage, cudaMemcpyDeviceToHost) ==
          cudaSuccess);
  CHECK(buf == std::vector<char>(kPage, 'c'));
  std::vector<char> update(kPage, 'q');
  REQUIRE(a.cudaMemcpy(d, update.data(), kPage, cudaMemcpyHostToDevice) == cudaSuccess);
  REQUIRE(write(to_child[1], &token, 1) == 1);
  int status = 0;
  REQUIRE(waitpid(pid, &status, 0) == pid);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  for (int fd : {to_parent[0], to_parent[1], to_child[0], to_child[1]}) close(fd);

  // A handle to freed memory no longer opens.
  REQUIRE(a.cudaFree(d) == cudaSuccess);
  pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    void* p = nullptr;
    cudaError_t e = a.cudaIpcOpenMemHandle(&p, handle, cudaIpcMemLazyEnablePeerAccess);
    _exit(e == cudaErrorInvalidResourceHandle ? 0 : 1);
  }
  REQUIRE(waitpid(pid, &status, 0) == pid);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
}

TEST_CASE("SOFTCUDA_IPC_SAME_PROCESS=1 opens in-process, reference counted", "[softcuda]") {
  Api& a = api();
  a.init();
  ScopedEnv same("SOFTCUDA_IPC_SAME_PROCESS", "1");
  void* d = nullptr;
  REQUIRE(a.cudaMalloc(&d, 100) == cudaSuccess);
  REQUIRE(a.cudaMemset(d, 0x3c, 100) == cudaSuccess);
  cudaIpcMemHandle_t handle{};
  REQUIRE(a.cudaIpcGetMemHandle(&handle, d) == cudaSuccess);
  const auto live = a.live_ipc_mappings();
  void* m1 = nullptr;
  void* m2 = nullptr;
  REQUIRE(a.cudaIpcOpenMemHandle(&m1, handle, cudaIpcMemLazyEnablePeerAccess) == cudaSuccess);
  REQUIRE(a.cudaIpcOpenMemHandle(&m2, handle, cudaIpcMemLazyEnablePeerAccess) == cudaSuccess);
  CHECK(m1 == m2);
  CHECK(m1 != d);
  CHECK(a.live_ipc_mappings() == live + 1);
  unsigned char c = 0;
  REQUIRE(a.cudaMemcpy(&c, static_cast<char*>(m1) + 99, 1, cudaMemcpyDeviceToHost) == cudaSuccess);
  CHECK(c == 0x3c);
  CHECK(a.cudaFree(m1) == cudaErrorInvalidValue);  // not an allocation of this process
  REQUIRE(a.cudaIpcCloseMemHandle(m1) == cudaSuccess);
  CHECK(a.live_ipc_mappings() == live + 1);
  REQUIRE(a.cudaIpcCloseMemHandle(m1) == cudaSuccess);
  CHECK(a.live_ipc_mappings() == live);
  REQUIRE(a.cudaFree(d) == cudaSuccess);
}

TEST_CASE("SOFTCUDA_PROTECT=1: the host cannot touch device memory", "[softcuda]") {
  Api& a = api();
  a.init();
  ScopedEnv protect("SOFTCUDA_PROTECT", "1");
  CUdeviceptr d = 0;
  REQUIRE(a.cuMemAlloc_v2(&d, 64) == CUDA_SUCCESS);
  const char msg[] = "through the driver";
  REQUIRE(a.cuMemcpyHtoD_v2(d, msg, sizeof(msg)) == CUDA_SUCCESS);
  char back[sizeof(msg)] = {};
  REQUIRE(a.cuMemcpyDtoH_v2(back, d, sizeof(back)) == CUDA_SUCCESS);
  CHECK(std::string(back) == msg);
  pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    std::signal(SIGSEGV, SIG_DFL);                           // not Catch's handler
    volatile char x = *reinterpret_cast<volatile char*>(d);  // must fault
    (void)x;
    _exit(0);
  }
  int status = 0;
  REQUIRE(waitpid(pid, &status, 0) == pid);
  CHECK(WIFSIGNALED(status));
  if (WIFSIGNALED(status)) CHECK(WTERMSIG(status) == SIGSEGV);
  REQUIRE(a.cuMemFree_v2(d) == CUDA_SUCCESS);
}

TEST_CASE("LD_LIBRARY_PATH puts the doubles before an installed CUDA", "[softcuda]") {
  Api& a = api();
  const char* path = std::getenv("LD_LIBRARY_PATH");
  if (path == nullptr || std::string(path).find(SOFTCUDA_DIR) == std::string::npos) {
    WARN("LD_LIBRARY_PATH does not name " SOFTCUDA_DIR "; skipped (run through ctest)");
    return;
  }
  // The names libfabric 2.6 dlopens.
  void* cudart = dlopen("libcudart.so", RTLD_NOW | RTLD_LOCAL);
  REQUIRE(cudart != nullptr);
  void* cuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  REQUIRE(cuda != nullptr);
  CHECK(cuda == a.cuda);
  Dl_info info{};
  REQUIRE(dladdr(dlsym(cudart, "cudaMalloc"), &info) != 0);
  CHECK(std::string(info.dli_fname).rfind(SOFTCUDA_DIR "/", 0) == 0);
  CHECK(dlsym(cuda, "softcuda_present") != nullptr);
  dlclose(cuda);
  dlclose(cudart);
}
