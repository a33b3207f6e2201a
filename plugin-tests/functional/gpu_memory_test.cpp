// GPU memory through weft, on whatever CUDA driver is first on the library
// path (softcuda in CI, a real one on a GPU machine). WEFT_TEST_EXPECT_GPU
// says what this build must do:
//   1  the device reports NCCL_PTR_CUDA: GPU buffers carry real transfers
//      (bytes checked through the driver, never read by the host), host and
//      GPU buffers share a comm on both sides, iflush returns a request
//      exactly when NCCL needs one, and dma-buf registration works;
//   0  (a libfabric without FI_HMEM, or a provider that would call CUDA
//      itself) the device reports host memory only and a GPU registration
//      fails with an error instead of crashing.
#include <dlfcn.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "core/cuda/cuda_driver.h"
#include "net_ops.h"
#include "pattern.h"
#include "two_rank.h"

using namespace weft;
using namespace weft::ft;

namespace {

constexpr int kAbi = 12;
constexpr size_t kArena = 8 << 20;

bool expect_gpu() {
  const char* value = std::getenv("WEFT_TEST_EXPECT_GPU");
  return value != nullptr && std::string(value) == "1";
}

std::unique_ptr<cuda::Driver> open_driver() {
  std::string reason;
  auto driver = cuda::Driver::open("libcuda.so.1", &reason);
  FT_REQUIRE(driver != nullptr, "no CUDA driver for the test: " << reason);
  return driver;
}

// Device memory freed on scope exit.
class DeviceBuffer {
 public:
  DeviceBuffer(const cuda::Driver& driver, size_t size) : driver_(driver) {
    std::string error;
    FT_REQUIRE(driver_.alloc(size, 0, &data_, &error), "cuMemAlloc of " << size << ": " << error);
  }
  ~DeviceBuffer() {
    std::string error;
    driver_.free(data_, &error);
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  uint8_t* data() const { return static_cast<uint8_t*>(data_); }

 private:
  const cuda::Driver& driver_;
  void* data_ = nullptr;
};

void to_device(const cuda::Driver& driver, void* dst, const void* src, size_t size) {
  std::string error;
  FT_REQUIRE(driver.copy_to_device(dst, src, size, &error), "cuMemcpyHtoD: " << error);
}

std::vector<uint8_t> from_device(const cuda::Driver& driver, const void* src, size_t size) {
  std::vector<uint8_t> host(size);
  std::string error;
  FT_REQUIRE(driver.copy_to_host(host.data(), src, size, &error), "cuMemcpyDtoH: " << error);
  return host;
}

int device_ptr_support(NetClient& c) {
  NetDeviceInfo info;
  FT_OK(c.properties(test_device(c), &info));
  return info.ptr_support;
}

// softcuda's flush counter, when the driver in use is softcuda.
unsigned long long flush_count() {
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  if (lib == nullptr) return 0;
  auto count = reinterpret_cast<unsigned long long (*)()>(dlsym(lib, "softcuda_flush_count"));
  unsigned long long value = count != nullptr ? count() : 0;
  dlclose(lib);
  return value;
}

// A send and a receive comm of one process, connected to each other.
void connect_to_itself(NetClient& c, int dev, void** send_comm, void** recv_comm) {
  Handle handle;
  void* listen_comm = do_listen(c, dev, handle);
  *send_comm = nullptr;
  *recv_comm = nullptr;
  while (*send_comm == nullptr || *recv_comm == nullptr) {
    FT_DEADLINE("connecting to itself");
    if (*send_comm == nullptr) FT_OK(c.connect(dev, handle.bytes, send_comm));
    if (*recv_comm == nullptr) FT_OK(c.accept(listen_comm, recv_comm));
  }
  FT_OK(c.close_listen(listen_comm));
}

const size_t kSizes[] = {0, 1, 4095, 4096, 65537, 1 << 20, 4 << 20};

// Sizes alternate between GPU and host memory on both sides: message i goes
// from (i % 2 ? host : GPU) to ((i / 2) % 2 ? host : GPU).
bool sender_uses_gpu(size_t i) {
  return i % 2 == 0;
}
bool receiver_uses_gpu(size_t i) {
  return (i / 2) % 2 == 0;
}

}  // namespace

TEST_CASE("GPU and host buffers on one comm: bytes, sizes, flush", "[gpu]") {
  if (!expect_gpu()) {
    auto r = run_one([&](Rank&) {
      auto c = open_plugin(kAbi);
      FT_REQUIRE((device_ptr_support(*c) & NCCL_PTR_CUDA) == 0,
                 "ptrSupport has CUDA although this libfabric has no FI_HMEM");
    });
    REQUIRE_RANKS(r);
    return;
  }
  const size_t count = std::size(kSizes) * 2;
  auto sender = [&](Rank& rank) {
    auto c = open_plugin(kAbi);
    FT_REQUIRE(device_ptr_support(*c) & NCCL_PTR_CUDA, "ptrSupport lacks NCCL_PTR_CUDA");
    auto driver = open_driver();
    void* comm = send_side_connect(*c, test_device(*c), *rank.peer);
    DeviceBuffer gpu(*driver, kArena);
    Buffer host(kArena);
    void* gpu_mh = nullptr;
    void* host_mh = nullptr;
    FT_OK(c->reg_mr(comm, gpu.data(), kArena, NCCL_PTR_CUDA, &gpu_mh));
    FT_OK(c->reg_mr(comm, host.data(), kArena, NCCL_PTR_HOST, &host_mh));
    for (size_t i = 0; i < count; ++i) {
      size_t size = kSizes[i % std::size(kSizes)];
      std::vector<uint8_t> pattern(size);
      fill_pattern(pattern.data(), size, pattern_seed(1, i));
      bool on_gpu = sender_uses_gpu(i);
      if (on_gpu) {
        to_device(*driver, gpu.data(), pattern.data(), size);
      } else {
        if (size > 0) std::memcpy(host.data(), pattern.data(), size);
      }
      rank.peer->send_u64(i);  // the receive is posted
      FT_REQUIRE(rank.peer->recv_u64() == i, "out of step");
      void* req = post_isend(*c, comm, on_gpu ? gpu.data() : host.data(), size, 0,
                             on_gpu ? gpu_mh : host_mh);
      wait_ok(*c, req, "send " + std::to_string(i));
    }
    FT_OK(c->dereg_mr(comm, gpu_mh));
    FT_OK(c->dereg_mr(comm, host_mh));
    FT_OK(c->close_send(comm));
  };
  auto receiver = [&](Rank& rank) {
    auto c = open_plugin(kAbi);
    auto driver = open_driver();
    void* comm = recv_side_connect(*c, test_device(*c), *rank.peer);
    DeviceBuffer gpu(*driver, kArena);
    Buffer host(kArena);
    void* gpu_mh = nullptr;
    void* host_mh = nullptr;
    FT_OK(c->reg_mr(comm, gpu.data(), kArena, NCCL_PTR_CUDA, &gpu_mh));
    FT_OK(c->reg_mr(comm, host.data(), kArena, NCCL_PTR_HOST, &host_mh));
    std::vector<uint8_t> poison(kArena, Buffer::kPoison);
    size_t flush_requests = 0;
    for (size_t i = 0; i < count; ++i) {
      size_t size = kSizes[i % std::size(kSizes)];
      size_t posted = size + 512;  // larger than sent: the tail must stay poisoned
      bool on_gpu = receiver_uses_gpu(i);
      uint8_t* data = on_gpu ? gpu.data() : host.data();
      void* mh = on_gpu ? gpu_mh : host_mh;
      if (on_gpu) {
        to_device(*driver, data, poison.data(), posted);
      } else {
        std::memset(data, Buffer::kPoison, posted);
      }
      void* req = post_irecv1(*c, comm, data, posted, 0, mh);
      FT_REQUIRE(rank.peer->recv_u64() == i, "out of step");
      rank.peer->send_u64(i);
      int got = wait_ok(*c, req, "receive " + std::to_string(i));
      FT_REQUIRE(static_cast<size_t>(got) == size,
                 "message " << i << ": test() reported " << got << " bytes, sent " << size);
      void* data_list[1] = {data};
      int sizes[1] = {got};
      void* mhandles[1] = {mh};
      void* flush = nullptr;
      FT_OK(c->iflush(comm, 1, data_list, sizes, mhandles, &flush));
      // NCCL waits on a flush request only where there is GPU data to flush.
      FT_REQUIRE((flush != nullptr) == (on_gpu && size > 0),
                 "message " << i << " (" << size << " bytes into " << (on_gpu ? "GPU" : "host")
                            << " memory): iflush returned " << (flush ? "a request" : "NULL"));
      if (flush != nullptr) {
        wait_ok(*c, flush, "flush " + std::to_string(i));
        ++flush_requests;
      }
      std::vector<uint8_t> received =
          on_gpu ? from_device(*driver, data, posted) : std::vector<uint8_t>(data, data + posted);
      check_received(received.data(), size, posted, pattern_seed(1, i),
                     "message " + std::to_string(i) + " (" + std::to_string(size) + " bytes, " +
                         (sender_uses_gpu(i) ? "GPU" : "host") + " to " +
                         (on_gpu ? "GPU" : "host") + ")");
    }
    FT_REQUIRE(flush_requests > 0, "no flush request at all");
    FT_OK(c->dereg_mr(comm, gpu_mh));
    FT_OK(c->dereg_mr(comm, host_mh));
    FT_OK(c->close_recv(comm));
  };
  REQUIRE_RANKS(run_two(sender, receiver));
}

TEST_CASE("dma-buf registration carries GPU data; the fd is not kept", "[gpu]") {
  if (!expect_gpu()) return;  // covered by the first case's refusal
  constexpr size_t kSize = 1 << 20;
  auto sender = [&](Rank& rank) {
    auto c = open_plugin(kAbi);
    FT_REQUIRE(device_ptr_support(*c) & NCCL_PTR_DMABUF, "ptrSupport lacks NCCL_PTR_DMABUF");
    auto driver = open_driver();
    void* comm = send_side_connect(*c, test_device(*c), *rank.peer);
    DeviceBuffer gpu(*driver, kSize);
    std::vector<uint8_t> pattern(kSize);
    fill_pattern(pattern.data(), kSize, pattern_seed(2, 0));
    to_device(*driver, gpu.data(), pattern.data(), kSize);
    int fd = -1;
    std::string error;
    FT_REQUIRE(driver->export_dmabuf(gpu.data(), kSize, &fd, &error), error);
    void* mh = nullptr;
    FT_OK(c->v12()->regMrDmaBuf(comm, gpu.data(), kSize, NCCL_PTR_CUDA, 0, fd, &mh));
    close(fd);  // as NCCL does, right after the call
    FT_REQUIRE(rank.peer->recv_u64() == 1, "out of step");
    wait_ok(*c, post_isend(*c, comm, gpu.data(), kSize, 0, mh), "dma-buf send");
    FT_OK(c->dereg_mr(comm, mh));
    FT_OK(c->close_send(comm));
  };
  auto receiver = [&](Rank& rank) {
    auto c = open_plugin(kAbi);
    auto driver = open_driver();
    void* comm = recv_side_connect(*c, test_device(*c), *rank.peer);
    DeviceBuffer gpu(*driver, kSize);
    int fd = -1;
    std::string error;
    FT_REQUIRE(driver->export_dmabuf(gpu.data(), kSize, &fd, &error), error);
    void* mh = nullptr;
    FT_OK(c->v12()->regMrDmaBuf(comm, gpu.data(), kSize, NCCL_PTR_CUDA, 0, fd, &mh));
    close(fd);
    void* req = post_irecv1(*c, comm, gpu.data(), kSize, 0, mh);
    rank.peer->send_u64(1);
    FT_REQUIRE(static_cast<size_t>(wait_ok(*c, req, "dma-buf receive")) == kSize, "size");
    std::vector<uint8_t> received = from_device(*driver, gpu.data(), kSize);
    check_received(received.data(), kSize, kSize, pattern_seed(2, 0), "dma-buf message");
    FT_OK(c->dereg_mr(comm, mh));
    FT_OK(c->close_recv(comm));
  };
  REQUIRE_RANKS(run_two(sender, receiver));
}

TEST_CASE("WEFT_GDR_FLUSH=cuda flushes through the driver, NULL request", "[gpu]") {
  if (!expect_gpu()) return;
  setenv("WEFT_GDR_FLUSH", "cuda", 1);
  auto r = run_one([&](Rank&) {
    auto c = open_plugin(kAbi);
    auto driver = open_driver();
    int dev = test_device(*c);
    // A comm to ourselves: listen, connect and accept from one process.
    void* send_comm = nullptr;
    void* recv_comm = nullptr;
    connect_to_itself(*c, dev, &send_comm, &recv_comm);
    DeviceBuffer gpu(*driver, 1 << 16);
    void* mh = nullptr;
    FT_OK(c->reg_mr(recv_comm, gpu.data(), 1 << 16, NCCL_PTR_CUDA, &mh));
    unsigned long long before = flush_count();
    void* data[1] = {gpu.data()};
    int sizes[1] = {4096};
    void* mhandles[1] = {mh};
    void* flush = reinterpret_cast<void*>(0x1);
    FT_OK(c->iflush(recv_comm, 1, data, sizes, mhandles, &flush));
    FT_REQUIRE(flush == nullptr, "a synchronous flush must return a NULL request");
    FT_REQUIRE(flush_count() == before + 1,
               "cuFlushGPUDirectRDMAWrites calls: " << before << " -> " << flush_count());
    FT_OK(c->dereg_mr(recv_comm, mh));
    FT_OK(c->close_send(send_comm));
    FT_OK(c->close_recv(recv_comm));
  });
  unsetenv("WEFT_GDR_FLUSH");
  REQUIRE_RANKS(r);
}

TEST_CASE("a GPU registration without GPU support fails with an error", "[gpu]") {
  setenv("WEFT_GPU", "off", 1);
  auto r = run_one([&](Rank&) {
    auto c = open_plugin(kAbi);
    FT_REQUIRE((device_ptr_support(*c) & NCCL_PTR_CUDA) == 0, "WEFT_GPU=off still reports CUDA");
    int dev = test_device(*c);
    void* send_comm = nullptr;
    void* recv_comm = nullptr;
    connect_to_itself(*c, dev, &send_comm, &recv_comm);
    std::vector<uint8_t> memory(1 << 16);
    void* mh = reinterpret_cast<void*>(0x1);
    ncclResult_t result = c->reg_mr(recv_comm, memory.data(), memory.size(), NCCL_PTR_CUDA, &mh);
    FT_REQUIRE(result == ncclInvalidUsage, "reg_mr returned " << result_name(result));
    FT_REQUIRE(mh == nullptr, "the handle of a failed registration must be NULL");
    FT_OK(c->close_send(send_comm));
    FT_OK(c->close_recv(recv_comm));
  });
  unsetenv("WEFT_GPU");
  REQUIRE_RANKS(r);
}
