// weft::cuda::Driver against softcuda (plugin-tests/doubles/softcuda), a libcuda.so.1
// double whose "device memory" is host memory from a memfd: the test can read
// it directly, and a dma-buf fd from it is a dup of that memfd. The hiding
// drivers (hiding_driver.cpp) put softcuda behind a cuGetProcAddress that
// lacks the entry points named in WEFT_TEST_CUDA_HIDE.
//
// ctest runs each test case in its own process; the knobs a test sets
// (SOFTCUDA_*, read by softcuda at each call) are restored when it ends, so
// the whole binary also runs in one process.
#include "core/cuda/cuda_driver.h"

#include <dlfcn.h>
#include <sys/mman.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "core/buffer_class.h"
#include "core/cuda/cuda_api.h"
#include "log_capture.h"
#include "weft/log.h"

namespace cuda = weft::cuda;

namespace {

constexpr const char* kSoftcuda = WEFT_SOFTCUDA_LIB;

size_t page_size() {
  return static_cast<size_t>(sysconf(_SC_PAGESIZE));
}

// Sets an environment variable for one scope.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    setenv(name, value, 1);
  }
  ~ScopedEnv() {
    if (old_) {
      setenv(name_.c_str(), old_->c_str(), 1);
    } else {
      unsetenv(name_.c_str());
    }
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  std::string name_;
  std::optional<std::string> old_;
};

std::unique_ptr<cuda::Driver> open_softcuda() {
  std::string reason;
  std::unique_ptr<cuda::Driver> driver = cuda::Driver::open(kSoftcuda, &reason);
  INFO("Driver::open(" << kSoftcuda << "): " << reason);
  REQUIRE(driver != nullptr);
  return driver;
}

// A softcuda (or CUDA) symbol from the already loaded double, to look behind
// the Driver's back.
template <typename F>
F softcuda_symbol(const char* name) {
  void* handle = dlopen(kSoftcuda, RTLD_NOW | RTLD_NOLOAD);
  REQUIRE(handle != nullptr);
  void* symbol = dlsym(handle, name);
  dlclose(handle);  // only drops the reference NOLOAD took
  INFO("dlsym " << name);
  REQUIRE(symbol != nullptr);
  return reinterpret_cast<F>(symbol);
}

unsigned long long softcuda_counter(const char* name) {
  return softcuda_symbol<unsigned long long (*)()>(name)();
}

// A device buffer freed at scope exit.
struct DeviceBuffer {
  DeviceBuffer(const cuda::Driver& driver, size_t size, int ordinal = 0) : driver(driver) {
    std::string error;
    bool allocated = driver.alloc(size, ordinal, &ptr, &error);
    INFO(error);
    REQUIRE(allocated);
    REQUIRE(ptr != nullptr);
  }
  ~DeviceBuffer() {
    std::string error;
    driver.free(ptr, &error);
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  char* bytes() const { return static_cast<char*>(ptr); }

  const cuda::Driver& driver;
  void* ptr = nullptr;
};

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

}  // namespace

TEST_CASE("open names a library that cannot be loaded", "[cuda]") {
  std::string reason;
  auto driver = cuda::Driver::open("/nonexistent/weft-test/libcuda.so.1", &reason);
  CHECK(driver == nullptr);
  INFO(reason);
  CHECK(contains(reason, "/nonexistent/weft-test/libcuda.so.1 not found: "));
  CHECK(contains(reason, "No such file"));
}

TEST_CASE("open refuses a library that is not a CUDA driver", "[cuda]") {
  std::string reason;
  auto driver = cuda::Driver::open("libm.so.6", &reason);
  CHECK(driver == nullptr);
  INFO(reason);
  CHECK(contains(reason, "libm.so.6 has no cuGetProcAddress"));
}

TEST_CASE("open reports no CUDA device when the driver has none", "[cuda]") {
  ScopedEnv devices("SOFTCUDA_DEVICES", "0");
  std::string reason;
  auto driver = cuda::Driver::open(kSoftcuda, &reason);
  CHECK(driver == nullptr);
  INFO(reason);
  CHECK(contains(reason, "no CUDA device"));
  // In its own process cuInit itself fails; after an earlier successful
  // cuInit in the same process softcuda reports 0 devices instead.
  CHECK((reason == "cuInit failed: CUDA_ERROR_NO_DEVICE (no CUDA device)" ||
         reason == "no CUDA device"));
}

TEST_CASE("open finds softcuda's devices and entry points", "[cuda]") {
  ScopedEnv devices("SOFTCUDA_DEVICES", "3");
  auto driver = open_softcuda();
  CHECK(driver->device_count() == 3);
  CHECK(driver->driver_version() == 13000);
  CHECK(driver->library() == kSoftcuda);
  CHECK(driver->has_flush());
  CHECK(driver->dmabuf_supported(2));
  CHECK_FALSE(driver->dmabuf_supported(3));
  CHECK_FALSE(driver->gdr_supported(-1));
}

TEST_CASE("an older driver is asked for its own version's entry points", "[cuda]") {
  // cuGetProcAddress fails for a CUDA version newer than the driver, and
  // dma-buf export only came with 11.7: the driver opens, without dma-buf.
  ScopedEnv version("SOFTCUDA_DRIVER_VERSION", "11040");
  auto driver = open_softcuda();
  CHECK(driver->driver_version() == 11040);
  CHECK(driver->has_flush());  // 11.3
  CHECK_FALSE(driver->dmabuf_supported(0));
  DeviceBuffer buffer(*driver, page_size());
  int fd = 7;
  std::string error;
  CHECK_FALSE(driver->export_dmabuf(buffer.ptr, page_size(), &fd, &error));
  CHECK(fd == -1);
  CHECK(error == std::string("cuMemGetHandleForAddressRange is not available in ") + kSoftcuda +
                     " (CUDA driver too old?)");
}

TEST_CASE("classify describes a device allocation from any pointer into it", "[cuda]") {
  auto driver = open_softcuda();
  const size_t size = 3 * page_size() + 100;
  DeviceBuffer first(*driver, size);
  DeviceBuffer second(*driver, page_size());
  cuda::PointerInfo info;
  std::string error;

  REQUIRE(driver->classify(first.ptr, &info, &error));
  CHECK(info.device);
  CHECK_FALSE(info.managed);
  CHECK(info.ordinal == 0);
  CHECK(info.base == reinterpret_cast<uintptr_t>(first.ptr));
  CHECK(info.size == size);
  CHECK(info.buffer_id != 0);
  const uint64_t first_id = info.buffer_id;

  cuda::PointerInfo interior;
  REQUIRE(driver->classify(first.bytes() + 2 * page_size() + 17, &interior, &error));
  CHECK(interior.device);
  CHECK(interior.base == info.base);
  CHECK(interior.size == size);
  CHECK(interior.buffer_id == first_id);

  REQUIRE(driver->classify(second.ptr, &info, &error));
  CHECK(info.device);
  CHECK(info.base == reinterpret_cast<uintptr_t>(second.ptr));
  CHECK(info.size == page_size());
  CHECK(info.buffer_id != first_id);
}

TEST_CASE("classify reports host memory as host, not as an error", "[cuda]") {
  auto driver = open_softcuda();
  std::vector<char> heap(4096);
  int stack = 0;
  std::string error;
  for (const void* ptr : {static_cast<const void*>(heap.data()), static_cast<const void*>(&stack),
                          static_cast<const void*>(nullptr)}) {
    cuda::PointerInfo info;
    info.device = true;  // must be overwritten
    info.ordinal = 5;
    INFO("pointer " << ptr);
    CHECK(driver->classify(ptr, &info, &error));
    CHECK_FALSE(info.device);
    CHECK(info.ordinal == -1);
    CHECK(info.size == 0);
  }

  // Pinned host memory is known to CUDA, as CU_MEMORYTYPE_HOST: still host.
  // cuMemHostAlloc needs a current context.
  using MemHostAlloc = cuda::CUresult (*)(void**, size_t, unsigned int);
  using MemFreeHost = cuda::CUresult (*)(void*);
  cuda::CUcontext context = nullptr;
  REQUIRE(softcuda_symbol<cuda::PFN_cuDevicePrimaryCtxRetain>("cuDevicePrimaryCtxRetain")(
              &context, 0) == cuda::CUDA_SUCCESS);
  REQUIRE(softcuda_symbol<cuda::PFN_cuCtxSetCurrent>("cuCtxSetCurrent")(context) ==
          cuda::CUDA_SUCCESS);
  void* pinned = nullptr;
  REQUIRE(softcuda_symbol<MemHostAlloc>("cuMemHostAlloc")(&pinned, 8192, 0) == cuda::CUDA_SUCCESS);
  cuda::PointerInfo info;
  CHECK(driver->classify(pinned, &info, &error));
  CHECK_FALSE(info.device);
  CHECK(softcuda_symbol<MemFreeHost>("cuMemFreeHost")(pinned) == cuda::CUDA_SUCCESS);
  softcuda_symbol<cuda::PFN_cuCtxSetCurrent>("cuCtxSetCurrent")(nullptr);
  softcuda_symbol<cuda::PFN_cuDevicePrimaryCtxRelease>("cuDevicePrimaryCtxRelease")(0);
}

TEST_CASE("alloc on a second GPU lands there and leaves the thread's context alone", "[cuda]") {
  ScopedEnv devices("SOFTCUDA_DEVICES", "2");
  auto driver = open_softcuda();
  auto get_current = softcuda_symbol<cuda::PFN_cuCtxGetCurrent>("cuCtxGetCurrent");
  auto get_device = softcuda_symbol<cuda::PFN_cuCtxGetDevice>("cuCtxGetDevice");

  // On a fresh thread (no context yet); Catch assertions stay on this one.
  struct Seen {
    cuda::CUcontext context_before = reinterpret_cast<cuda::CUcontext>(1);
    cuda::CUcontext context_after_0 = nullptr;
    cuda::CUdevice device_after_0 = -1;
    cuda::CUdevice device_after_1 = -1;
    bool allocated[3] = {false, false, true};
    void* ptr[3] = {nullptr, nullptr, nullptr};
    std::string errors[3];
  } seen;
  std::thread([&] {
    get_current(&seen.context_before);
    seen.allocated[0] = driver->alloc(4096, 0, &seen.ptr[0], &seen.errors[0]);
    get_current(&seen.context_after_0);
    get_device(&seen.device_after_0);
    seen.allocated[1] = driver->alloc(4096, 1, &seen.ptr[1], &seen.errors[1]);
    get_device(&seen.device_after_1);
    seen.allocated[2] = driver->alloc(4096, 2, &seen.ptr[2], &seen.errors[2]);
  }).join();

  CHECK(seen.context_before == nullptr);
  INFO(seen.errors[0] << " / " << seen.errors[1]);
  REQUIRE(seen.allocated[0]);
  REQUIRE(seen.allocated[1]);
  // A thread without a context gets GPU 0's primary one and keeps it...
  CHECK(seen.context_after_0 != nullptr);
  CHECK(seen.device_after_0 == 0);
  // ...and gets it back after an allocation on GPU 1.
  CHECK(seen.device_after_1 == 0);
  cuda::PointerInfo info;
  std::string error;
  REQUIRE(driver->classify(seen.ptr[0], &info, &error));
  CHECK(info.ordinal == 0);
  REQUIRE(driver->classify(seen.ptr[1], &info, &error));
  CHECK(info.ordinal == 1);
  CHECK_FALSE(seen.allocated[2]);
  CHECK(seen.ptr[2] == nullptr);
  CHECK(seen.errors[2] == "cuMemAlloc(4096 bytes on GPU 2) failed: no such GPU (2 visible)");
  CHECK(driver->free(seen.ptr[0], &error));
  CHECK(driver->free(seen.ptr[1], &error));
}

TEST_CASE("a driver from open releases the primary contexts it retained", "[cuda]") {
  using GetState = cuda::CUresult (*)(cuda::CUdevice, unsigned int*, int*);
  std::optional<GetState> get_state;
  {
    auto driver = open_softcuda();
    get_state = softcuda_symbol<GetState>("cuDevicePrimaryCtxGetState");
    unsigned int flags = 0;
    int active = -1;
    REQUIRE((*get_state)(0, &flags, &active) == cuda::CUDA_SUCCESS);
    REQUIRE(active == 0);
    bool flushed = false;
    std::thread([&] {
      std::string error;
      flushed = driver->flush_rdma_writes(&error);
    }).join();
    CHECK(flushed);
    REQUIRE((*get_state)(0, &flags, &active) == cuda::CUDA_SUCCESS);
    CHECK(active == 1);
  }
  unsigned int flags = 0;
  int active = -1;
  REQUIRE((*get_state)(0, &flags, &active) == cuda::CUDA_SUCCESS);
  CHECK(active == 0);
}

TEST_CASE("set_sync_memops sets the attribute on device memory", "[cuda]") {
  auto driver = open_softcuda();
  DeviceBuffer buffer(*driver, 3 * page_size());
  auto get_attribute = softcuda_symbol<cuda::PFN_cuPointerGetAttribute>("cuPointerGetAttribute");
  auto sync_memops = [&](const void* ptr) {
    unsigned int value = 7;
    REQUIRE(get_attribute(&value, cuda::CU_POINTER_ATTRIBUTE_SYNC_MEMOPS,
                          reinterpret_cast<uintptr_t>(ptr)) == cuda::CUDA_SUCCESS);
    return value;
  };
  CHECK(sync_memops(buffer.ptr) == 0);
  std::string error;
  REQUIRE(driver->set_sync_memops(buffer.bytes() + page_size(), &error));
  CHECK(sync_memops(buffer.ptr) == 1);  // the attribute belongs to the allocation

  std::vector<char> host(64);
  CHECK_FALSE(driver->set_sync_memops(host.data(), &error));
  CHECK(error == "cuPointerSetAttribute(SYNC_MEMOPS) failed: CUDA_ERROR_INVALID_VALUE");
}

TEST_CASE("a refused SYNC_MEMOPS is said once per process, not per registration", "[cuda]") {
  // What a real driver answers for memory from cuMemCreate, NCCL's own.
  ScopedEnv refuse("SOFTCUDA_SYNC_MEMOPS", "0");
  auto driver = open_softcuda();
  DeviceBuffer first(*driver, page_size());
  DeviceBuffer second(*driver, page_size());
  weft::set_logger(weft::ft::capture_log);
  for (void* ptr : {first.ptr, second.ptr, first.ptr}) {
    weft::BufferClass buffer;
    CHECK(weft::classify_buffer("dev0", driver.get(), "", ptr, page_size(), NCCL_PTR_CUDA,
                                &buffer) == ncclSuccess);
  }
  weft::set_logger(nullptr);
  int said = 0;
  for (const auto& line : weft::ft::logged_lines()) {
    if (contains(line.text, "SYNC_MEMOPS")) {
      ++said;
      CHECK(contains(line.text, "CUDA_ERROR_NOT_SUPPORTED"));
    }
  }
  CHECK(said == 1);
}

TEST_CASE("export_dmabuf gives an fd that maps the device bytes", "[cuda]") {
  auto driver = open_softcuda();
  const size_t size = 4 * page_size();
  DeviceBuffer buffer(*driver, size);
  std::vector<unsigned char> pattern(size);
  for (size_t i = 0; i < size; ++i) pattern[i] = static_cast<unsigned char>(i * 7 + 3);
  std::string error;
  REQUIRE(driver->copy_to_device(buffer.ptr, pattern.data(), size, &error));

  const unsigned long long exports = softcuda_counter("softcuda_dmabuf_exports");
  int fd = -1;
  bool exported = driver->export_dmabuf(buffer.ptr, size, &fd, &error);
  INFO(error);
  REQUIRE(exported);
  REQUIRE(fd >= 0);
  CHECK(softcuda_counter("softcuda_dmabuf_exports") == exports + 1);
  void* mapped = mmap(nullptr, size, PROT_READ, MAP_SHARED, fd, 0);
  REQUIRE(mapped != MAP_FAILED);
  CHECK(std::memcmp(mapped, pattern.data(), size) == 0);
  // The same memory, not a copy: a later device write shows through.
  const char later[] = "written after the export";
  REQUIRE(driver->copy_to_device(buffer.bytes() + page_size(), later, sizeof(later), &error));
  CHECK(std::memcmp(static_cast<char*>(mapped) + page_size(), later, sizeof(later)) == 0);
  munmap(mapped, size);
  close(fd);

  // A page-aligned part of the allocation is fine too.
  fd = -1;
  REQUIRE(driver->export_dmabuf(buffer.bytes() + page_size(), 2 * page_size(), &fd, &error));
  CHECK(fd >= 0);
  close(fd);
}

TEST_CASE("export_dmabuf rejects ranges the driver cannot export", "[cuda]") {
  auto driver = open_softcuda();
  const size_t page = page_size();
  DeviceBuffer buffer(*driver, 2 * page);
  const unsigned long long exports = softcuda_counter("softcuda_dmabuf_exports");
  std::string error;
  int fd = 0;

  CHECK_FALSE(driver->export_dmabuf(buffer.bytes() + 1, page, &fd, &error));
  CHECK(fd == -1);
  CHECK(contains(error, "must be aligned to the page size"));
  fd = 0;
  CHECK_FALSE(driver->export_dmabuf(buffer.ptr, page + 1, &fd, &error));
  CHECK(fd == -1);
  CHECK(contains(error, "aligned"));
  CHECK_FALSE(driver->export_dmabuf(buffer.ptr, 0, &fd, &error));
  CHECK(contains(error, "aligned"));

  CHECK_FALSE(driver->export_dmabuf(buffer.ptr, 3 * page, &fd, &error));
  CHECK(contains(error, "leaves its CUDA allocation"));
  CHECK_FALSE(driver->export_dmabuf(buffer.bytes() + page, 2 * page, &fd, &error));
  CHECK(contains(error, "leaves its CUDA allocation"));

  void* host = std::aligned_alloc(page, page);
  REQUIRE(host != nullptr);
  CHECK_FALSE(driver->export_dmabuf(host, page, &fd, &error));
  CHECK(contains(error, "not CUDA device memory"));
  std::free(host);

  CHECK(softcuda_counter("softcuda_dmabuf_exports") == exports);
}

TEST_CASE("export_dmabuf fails clearly where the GPU has no dma-buf", "[cuda]") {
  ScopedEnv dmabuf("SOFTCUDA_DMABUF", "0");
  auto driver = open_softcuda();
  CHECK_FALSE(driver->dmabuf_supported(0));
  DeviceBuffer buffer(*driver, page_size());
  std::string error;
  int fd = 0;
  CHECK_FALSE(driver->export_dmabuf(buffer.ptr, page_size(), &fd, &error));
  CHECK(fd == -1);
  CHECK(error ==
        "cuMemGetHandleForAddressRange(DMA_BUF_FD) failed: CUDA_ERROR_NOT_SUPPORTED (no dma-buf "
        "support in this GPU, driver or kernel)");
}

TEST_CASE("gdr_supported and dmabuf_supported follow the device attributes", "[cuda]") {
  auto driver = open_softcuda();
  CHECK(driver->gdr_supported(0));
  CHECK(driver->dmabuf_supported(0));
  CHECK_FALSE(driver->gdr_supported(1));  // no such device
  CHECK_FALSE(driver->dmabuf_supported(-1));
  {
    ScopedEnv gdr("SOFTCUDA_GDR", "0");
    CHECK_FALSE(driver->gdr_supported(0));
    CHECK(driver->dmabuf_supported(0));
  }
  {
    ScopedEnv dmabuf("SOFTCUDA_DMABUF", "0");
    CHECK(driver->gdr_supported(0));
    CHECK_FALSE(driver->dmabuf_supported(0));
  }
}

TEST_CASE("flush_rdma_writes flushes through the driver", "[cuda]") {
  auto driver = open_softcuda();
  REQUIRE(driver->has_flush());
  const unsigned long long before = softcuda_counter("softcuda_flush_count");
  // A fresh thread has no context: the flush needs one, so the driver makes
  // GPU 0's primary context current.
  bool flushed[2] = {false, false};
  std::string thread_error;
  std::thread([&] {
    for (bool& ok : flushed) ok = driver->flush_rdma_writes(&thread_error);
  }).join();
  INFO(thread_error);
  CHECK(flushed[0]);
  CHECK(flushed[1]);
  CHECK(softcuda_counter("softcuda_flush_count") == before + 2);

  ScopedEnv gdr("SOFTCUDA_GDR", "0");
  std::string error;
  CHECK_FALSE(driver->flush_rdma_writes(&error));
  CHECK(error == "cuFlushGPUDirectRDMAWrites failed: CUDA_ERROR_NOT_SUPPORTED");
  CHECK(softcuda_counter("softcuda_flush_count") == before + 2);
}

TEST_CASE("alloc, copies and free round-trip through device memory", "[cuda]") {
  auto driver = open_softcuda();
  const unsigned long long live = softcuda_counter("softcuda_live_allocations");
  const size_t size = (1 << 20) + 13;
  std::vector<unsigned char> out(size), in(size, 0);
  for (size_t i = 0; i < size; ++i) out[i] = static_cast<unsigned char>((i * 131) >> 3);
  std::string error;
  void* ptr = nullptr;
  REQUIRE(driver->alloc(size, 0, &ptr, &error));
  CHECK(softcuda_counter("softcuda_live_allocations") == live + 1);
  REQUIRE(driver->copy_to_device(ptr, out.data(), size, &error));
  // softcuda's device memory is host-readable: the bytes really are there.
  CHECK(std::memcmp(ptr, out.data(), size) == 0);
  REQUIRE(driver->copy_to_host(in.data(), ptr, size, &error));
  CHECK(in == out);

  REQUIRE(driver->free(ptr, &error));
  CHECK(softcuda_counter("softcuda_live_allocations") == live);
  CHECK_FALSE(driver->free(ptr, &error));
  CHECK(contains(error, "cuMemFree failed: CUDA_ERROR_"));
}

TEST_CASE("shared opens each library once and keeps the result", "[cuda]") {
  const cuda::Driver* first = cuda::Driver::shared(kSoftcuda);
  REQUIRE(first != nullptr);
  CHECK(cuda::Driver::shared(kSoftcuda) == first);
  CHECK(first->device_count() == 1);

  CHECK(cuda::Driver::shared("/nonexistent/weft-test/libcuda.so.1") == nullptr);
  CHECK(cuda::Driver::shared("/nonexistent/weft-test/libcuda.so.1") == nullptr);
}

TEST_CASE("the libcuda.so.1 soname resolves to softcuda under ctest", "[cuda]") {
  const char* path = std::getenv("LD_LIBRARY_PATH");
  if (path == nullptr || !contains(path, WEFT_SOFTCUDA_DIR)) {
    WARN("softcuda's directory is not on LD_LIBRARY_PATH (run through ctest); skipped");
    return;
  }
  const cuda::Driver* driver = cuda::Driver::shared("libcuda.so.1");
  REQUIRE(driver != nullptr);
  void* handle = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  REQUIRE(handle != nullptr);
  CHECK(dlsym(handle, "softcuda_present") != nullptr);
  dlclose(handle);
}

TEST_CASE("the CUDA 11.3 form of cuGetProcAddress works too", "[cuda]") {
  std::string reason;
  auto driver = cuda::Driver::open(WEFT_HIDING_DRIVER_V1, &reason);
  INFO(reason);
  REQUIRE(driver != nullptr);
  CHECK(driver->has_flush());
  CHECK(driver->dmabuf_supported(0));
  DeviceBuffer buffer(*driver, page_size());
  cuda::PointerInfo info;
  std::string error;
  REQUIRE(driver->classify(buffer.ptr, &info, &error));
  CHECK(info.device);
  int fd = -1;
  CHECK(driver->export_dmabuf(buffer.ptr, page_size(), &fd, &error));
  CHECK(fd >= 0);
  if (fd >= 0) close(fd);
}

TEST_CASE("open names a missing required entry point", "[cuda]") {
  for (const char* form : {WEFT_HIDING_DRIVER_V2, WEFT_HIDING_DRIVER_V1}) {
    for (const char* name : {"cuGetErrorName", "cuInit", "cuDeviceGetCount", "cuDeviceGet",
                             "cuDeviceGetAttribute", "cuPointerGetAttribute"}) {
      ScopedEnv hide("WEFT_TEST_CUDA_HIDE", name);
      std::string reason;
      auto driver = cuda::Driver::open(form, &reason);
      CHECK(driver == nullptr);
      CHECK(reason == std::string(form) + " lacks " + name + " (not a CUDA driver, or too old)");
    }
  }
}

TEST_CASE("classify works one attribute at a time without cuPointerGetAttributes", "[cuda]") {
  ScopedEnv hide("WEFT_TEST_CUDA_HIDE", "cuPointerGetAttributes");
  std::string reason;
  auto driver = cuda::Driver::open(WEFT_HIDING_DRIVER_V2, &reason);
  INFO(reason);
  REQUIRE(driver != nullptr);
  const size_t size = 2 * page_size() + 5;
  DeviceBuffer buffer(*driver, size);
  cuda::PointerInfo info;
  std::string error;
  REQUIRE(driver->classify(buffer.bytes() + page_size() + 3, &info, &error));
  CHECK(info.device);
  CHECK_FALSE(info.managed);
  CHECK(info.ordinal == 0);
  CHECK(info.base == reinterpret_cast<uintptr_t>(buffer.ptr));
  CHECK(info.size == size);
  CHECK(info.buffer_id != 0);

  std::vector<char> host(100);
  info = cuda::PointerInfo{};
  info.device = true;
  CHECK(driver->classify(host.data(), &info, &error));
  CHECK_FALSE(info.device);
}

TEST_CASE("missing optional entry points turn their feature off with a clear error", "[cuda]") {
  ScopedEnv hide("WEFT_TEST_CUDA_HIDE",
                 "cuFlushGPUDirectRDMAWrites,cuMemGetHandleForAddressRange,cuPointerSetAttribute,"
                 "cuMemcpyHtoD");
  std::string reason;
  auto driver = cuda::Driver::open(WEFT_HIDING_DRIVER_V2, &reason);
  INFO(reason);
  REQUIRE(driver != nullptr);
  const std::string in =
      std::string(" is not available in ") + WEFT_HIDING_DRIVER_V2 + " (CUDA driver too old?)";
  std::string error;
  CHECK_FALSE(driver->has_flush());
  CHECK_FALSE(driver->flush_rdma_writes(&error));
  CHECK(error == "cuFlushGPUDirectRDMAWrites" + in);
  CHECK_FALSE(driver->dmabuf_supported(0));  // although the device attribute says yes
  CHECK(driver->gdr_supported(0));

  DeviceBuffer buffer(*driver, page_size());
  int fd = 0;
  CHECK_FALSE(driver->export_dmabuf(buffer.ptr, page_size(), &fd, &error));
  CHECK(fd == -1);
  CHECK(error == "cuMemGetHandleForAddressRange" + in);
  CHECK_FALSE(driver->set_sync_memops(buffer.ptr, &error));
  CHECK(error == "cuPointerSetAttribute" + in);
  char byte = 1;
  CHECK_FALSE(driver->copy_to_device(buffer.ptr, &byte, 1, &error));
  CHECK(error == "cuMemcpyHtoD" + in);
  CHECK(driver->copy_to_host(&byte, buffer.ptr, 1, &error));
}

TEST_CASE("a thread without a context needs cuDevicePrimaryCtxRetain", "[cuda]") {
  ScopedEnv hide("WEFT_TEST_CUDA_HIDE", "cuDevicePrimaryCtxRetain");
  std::string reason;
  auto driver = cuda::Driver::open(WEFT_HIDING_DRIVER_V2, &reason);
  INFO(reason);
  REQUIRE(driver != nullptr);
  bool flushed = true;
  std::string error;
  std::thread([&] { flushed = driver->flush_rdma_writes(&error); }).join();
  CHECK_FALSE(flushed);
  CHECK(error == std::string("no CUDA context is current on this thread and "
                             "cuDevicePrimaryCtxRetain is not available in ") +
                     WEFT_HIDING_DRIVER_V2);
}
