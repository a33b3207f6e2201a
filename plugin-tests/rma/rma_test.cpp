// The one-sided suite: every check runs in N ranks (WEFT_TEST_RANKS, 4 when
// unset), each its own process, through the table WEFT_TEST_RMA_TABLE
// names, and checks real bytes.
#include <dirent.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "core/cuda/cuda_driver.h"
#include "plugin_under_test.h"
#include "rank_team.h"
#include "rma_session.h"

namespace weft::rt {
namespace {

int team_size() {
  const char* value = std::getenv("WEFT_TEST_RANKS");
  return value != nullptr ? std::atoi(value) : 4;
}

void require_passed(const std::vector<std::string>& failures) {
  for (const std::string& failure : failures) UNSCOPED_INFO(failure);
  REQUIRE(failures.empty());
}

// Page-aligned, zeroed host memory: anonymous pages, zero from the start,
// with no pass over windows of up to 4 x 64 MiB per rank before a check.
struct HostBuffer {
  explicit HostBuffer(size_t bytes) : size(bytes), mapped(bytes == 0 ? 4096 : bytes) {
    void* memory =
        ::mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (memory != MAP_FAILED) data = static_cast<uint8_t*>(memory);
  }
  ~HostBuffer() {
    if (data != nullptr) ::munmap(data, mapped);
  }
  HostBuffer(const HostBuffer&) = delete;
  HostBuffer& operator=(const HostBuffer&) = delete;
  uint8_t* data = nullptr;
  size_t size;
  size_t mapped;
};

#define RT_TRY(expr)                        \
  do {                                      \
    std::string rt_error = (expr);          \
    if (!rt_error.empty()) return rt_error; \
  } while (0)

#define RT_CALL(what, expr)                                            \
  do {                                                                 \
    ncclResult_t rt_result = (expr);                                   \
    if (rt_result != ncclSuccess) return failed_call(what, rt_result); \
  } while (0)

// The regions a check registers, deregistered together at its end.
class Regions {
 public:
  explicit Regions(Session& session) : session_(session) {}
  std::string add(HostBuffer& buffer, void** mhandle) {
    return add(buffer.data, buffer.size, mhandle, NCCL_PTR_HOST);
  }
  std::string add(void* data, size_t size, void** mhandle, int type) {
    RT_TRY(session_.register_region(data, size, mhandle, type));
    handles_.push_back(*mhandle);
    return "";
  }
  std::string release() {
    for (void* mhandle : handles_) {
      RT_CALL("deregMrSym", session_.table().dereg(session_.comm(), mhandle));
    }
    handles_.clear();
    return "";
  }

 private:
  Session& session_;
  std::vector<void*> handles_;
};

// Runs `check` in every rank of a team of team_size(), on a connected
// session that is closed after it.
void run_ranks(const std::function<std::string(Session&, Team&)>& check, int timeout_s = 600) {
  require_passed(run_team(
      team_size(),
      [&](Team& team) -> std::string {
        Session session(team);
        RT_TRY(session.open());
        // A failed check leaves its buffers registered with peers still
        // writing: end the process rather than free them under the NIC.
        if (std::string error = check(session, team); !error.empty()) team.fail(error);
        return session.close();
      },
      timeout_s));
}

std::vector<size_t> transfer_sizes() {
  std::vector<size_t> sizes;
  for (size_t size : {size_t{0}, size_t{1}, size_t{8}, size_t{4095}, size_t{65536}, size_t{1} << 20,
                      size_t{64} << 20}) {
    if (size <= largest_transfer()) sizes.push_back(size);
  }
  return sizes;
}

// What a process holds per peer, on the providers where it shows: open
// file descriptors (tcp: a socket per connection) and mappings (shm: a
// peer's region, mapped when its address is inserted).
struct PeerResources {
  int fds = 0;
  int mappings = 0;
  int total() const { return fds + mappings; }
  std::string text() const {
    return std::to_string(fds) + " fds, " + std::to_string(mappings) + " mappings";
  }
};

PeerResources count_resources() {
  PeerResources counted;
  if (DIR* dir = ::opendir("/proc/self/fd"); dir != nullptr) {
    while (const dirent* entry = ::readdir(dir)) counted.fds += entry->d_name[0] != '.';
    ::closedir(dir);
  }
  std::ifstream maps("/proc/self/maps");
  for (std::string line; std::getline(maps, line);) ++counted.mappings;
  return counted;
}

// Puts a 4 KiB block and a signal to each of `peers`, then waits for a
// signal from each of `senders` and checks their blocks. The window holds
// one block per sender, the signals one word per sender.
std::string put_to_peers(Session& session, const RmaTarget& target, HostBuffer& source,
                         void* source_mr, HostBuffer& window, void* window_mr, HostBuffer& signals,
                         void* signals_mr, const std::vector<int>& peers,
                         const std::vector<int>& senders, uint64_t round) {
  constexpr size_t kBlock = 4096;
  const int me = session.team().rank();
  for (int peer : peers) {
    uint8_t* block = source.data + static_cast<size_t>(peer) * kBlock;
    fill_pattern(block, kBlock, me, peer, static_cast<uint32_t>(round));
    void* request = nullptr;
    RT_CALL("iputSignal",
            session.table().put_signal(target, 0, static_cast<uint64_t>(peer) * kBlock, source_mr,
                                       kBlock, static_cast<uint64_t>(me) * kBlock, window_mr,
                                       static_cast<uint32_t>(peer), 8 * static_cast<uint64_t>(me),
                                       signals_mr, 1, NCCL_NET_SIGNAL_OP_ADD, true, &request));
    RT_TRY(session.wait(target, request, "iputSignal"));
  }
  for (int sender : senders) {
    RT_TRY(session.wait_signal(target, signals.data + 8 * sender, round, "a peer's signal"));
    RT_TRY(check_pattern(window.data + static_cast<size_t>(sender) * kBlock, kBlock, sender, me,
                         static_cast<uint32_t>(round)));
  }
  return "";
}

}  // namespace

TEST_CASE("puts of 0 B to the largest size land byte for byte at every rank", "[rma][put]") {
  run_ranks([](Session& session, Team& team) -> std::string {
    RmaTarget target;
    RT_TRY(session.make_target(1, &target));
    const size_t largest = largest_transfer();
    const int n = team.size();
    const int me = team.rank();
    HostBuffer source(largest);
    HostBuffer window(largest * n);
    HostBuffer signals(8 * 64);
    void* source_mr = nullptr;
    void* window_mr = nullptr;
    void* signals_mr = nullptr;
    Regions regions(session);
    RT_TRY(regions.add(source, &source_mr));
    RT_TRY(regions.add(window, &window_mr));
    RT_TRY(regions.add(signals, &signals_mr));
    uint32_t salt = 0;
    for (size_t size : transfer_sizes()) {
      ++salt;
      // To every rank, this one included (NCCL's graph flush puts to itself).
      for (int peer = 0; peer < n; ++peer) {
        fill_pattern(source.data, size, me, peer, salt);
        void* request = nullptr;
        RT_CALL("iput", session.table().put(target, 0, 0, source_mr, size,
                                            static_cast<uint64_t>(me) * largest, window_mr,
                                            static_cast<uint32_t>(peer), &request));
        RT_TRY(session.wait(target, request, "iput"));
        // A signal alone: visible only after the put before it.
        RT_CALL("iputSignal",
                session.table().put_signal(target, 0, 0, nullptr, 0, 0, nullptr,
                                           static_cast<uint32_t>(peer), 8 * (salt % 64), signals_mr,
                                           1, NCCL_NET_SIGNAL_OP_ADD, true, &request));
        RT_TRY(session.wait(target, request, "iputSignal"));
      }
      RT_TRY(session.wait_signal(target, signals.data + 8 * (salt % 64), static_cast<uint64_t>(n),
                                 "puts' signals"));
      for (int sender = 0; sender < n; ++sender) {
        std::string error = check_pattern(window.data + static_cast<size_t>(sender) * largest, size,
                                          sender, me, salt);
        if (!error.empty()) return "put of " + std::to_string(size) + " bytes: " + error;
      }
      RT_TRY(session.barrier(target));
    }
    RT_TRY(regions.release());
    RT_CALL("destroyContext", session.table().destroy_context(target));
    return "";
  });
}

TEST_CASE("a signal is never seen before the data it covers", "[rma][signal]") {
  run_ranks([](Session& session, Team& team) -> std::string {
    RmaTarget target;
    const int contexts = session.table().has_contexts() ? 4 : 1;
    RT_TRY(session.make_target(contexts, &target));
    constexpr int kBlocks = 256;
    constexpr size_t kBlock = 32 << 10;
    const int n = team.size();
    const int me = team.rank();
    const int next = (me + 1) % n;
    const int previous = (me + n - 1) % n;
    HostBuffer source(kBlock * kBlocks);
    HostBuffer window(kBlock * kBlocks);
    HostBuffer signals(8 * kBlocks);
    void* source_mr = nullptr;
    void* window_mr = nullptr;
    void* signals_mr = nullptr;
    Regions regions(session);
    RT_TRY(regions.add(source, &source_mr));
    RT_TRY(regions.add(window, &window_mr));
    RT_TRY(regions.add(signals, &signals_mr));
    fill_pattern(source.data, source.size, me, next, 77);
    std::vector<void*> requests(kBlocks, nullptr);
    std::vector<bool> checked(kBlocks, false);
    int posted = 0;
    int finished = 0;
    int verified = 0;
    // Block b goes on context b % contexts; its signal word gets b + 1. A
    // strong signal also covers every earlier block of its context.
    auto verify = [&]() -> std::string {
      for (int b = 0; b < kBlocks; ++b) {
        if (checked[b] || load_signal(signals.data + 8 * b) == 0) continue;
        uint64_t value = load_signal(signals.data + 8 * b);
        if (value != static_cast<uint64_t>(b) + 1) {
          return "signal " + std::to_string(b) + " reads " + std::to_string(value);
        }
        bool strong = !session.table().has_strength() || b % 2 == 0;
        for (int earlier = strong ? b % contexts : b; earlier <= b; earlier += contexts) {
          const uint8_t* got = window.data + kBlock * earlier;
          for (size_t i = 0; i < kBlock; ++i) {
            uint8_t expected = pattern_byte(previous, me, kBlock * earlier + i, 77);
            if (got[i] != expected) {
              return "block " + std::to_string(earlier) + " byte " + std::to_string(i) +
                     " not there when signal " + std::to_string(b) + " (" +
                     (strong ? "strong" : "weak") + ") was seen";
            }
          }
        }
        checked[b] = true;
        ++verified;
      }
      return "";
    };
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(300);
    while (finished < kBlocks || verified < kBlocks) {
      if (posted < kBlocks) {
        int b = posted;
        bool strong = !session.table().has_strength() || b % 2 == 0;
        RT_CALL("iputSignal",
                session.table().put_signal(target, b % contexts, kBlock * b, source_mr, kBlock,
                                           kBlock * b, window_mr, static_cast<uint32_t>(next),
                                           8 * b, signals_mr, static_cast<uint64_t>(b) + 1,
                                           NCCL_NET_SIGNAL_OP_ADD, strong, &requests[b]));
        if (requests[b] == nullptr) return "iputSignal returned success and a NULL request";
        ++posted;
      }
      for (int b = finished; b < posted; ++b) {
        if (requests[b] == nullptr) continue;
        int done = 0;
        RT_CALL("test", session.table().test(session.comm(), requests[b], &done));
        if (done) requests[b] = nullptr;
      }
      while (finished < posted && requests[finished] == nullptr) ++finished;
      RT_CALL("progress", session.table().progress(target));
      RT_TRY(verify());
      if (std::chrono::steady_clock::now() > deadline) {
        return "after 300 s: " + std::to_string(finished) + " of " + std::to_string(kBlocks) +
               " sent, " + std::to_string(verified) + " received";
      }
    }
    RT_TRY(session.barrier(target));
    bool has_error = true;
    RT_CALL("queryLastError", session.table().query_last_error(target, &has_error));
    if (has_error) return "queryLastError reports an error after a clean run";
    RT_TRY(regions.release());
    RT_CALL("destroyContext", session.table().destroy_context(target));
    return "";
  });
}

TEST_CASE("gets read every rank's bytes, and a flush covers them", "[rma][get]") {
  run_ranks([](Session& session, Team& team) -> std::string {
    if (!session.table().has_get()) return "";  // GIN v11/v12 have no iget
    RmaTarget target;
    RT_TRY(session.make_target(2, &target));
    const size_t largest = largest_transfer();
    const int n = team.size();
    const int me = team.rank();
    HostBuffer window(largest * n);
    HostBuffer landing(largest * n);
    void* window_mr = nullptr;
    void* landing_mr = nullptr;
    Regions regions(session);
    RT_TRY(regions.add(window, &window_mr));
    RT_TRY(regions.add(landing, &landing_mr));
    for (int reader = 0; reader < n; ++reader) {
      fill_pattern(window.data + static_cast<size_t>(reader) * largest, largest, me, reader, 5);
    }
    RT_TRY(session.barrier(target));
    for (size_t size : transfer_sizes()) {
      std::vector<void*> requests;
      for (int peer = 0; peer < n; ++peer) {
        void* request = nullptr;
        uint64_t at = static_cast<uint64_t>(peer) * largest;
        RT_CALL("iget", session.table().get(target, peer % 2, static_cast<uint64_t>(me) * largest,
                                            window_mr, size, at, landing_mr,
                                            static_cast<uint32_t>(peer), &request));
        if (request == nullptr) return "iget returned success and a NULL request";
        requests.push_back(request);
      }
      // A flush completes only once the gets before it landed.
      for (int peer = 0; peer < n; ++peer) {
        void* request = nullptr;
        RT_CALL("iflush", session.table().flush(target, peer % 2, window_mr,
                                                static_cast<uint32_t>(peer), &request));
        if (request != nullptr) RT_TRY(session.wait(target, request, "iflush"));
        std::string error =
            check_pattern(landing.data + static_cast<size_t>(peer) * largest, size, peer, me, 5);
        if (!error.empty())
          return "get of " + std::to_string(size) + " bytes after iflush: " + error;
      }
      for (void* request : requests) RT_TRY(session.wait(target, request, "iget"));
    }
    // Nothing outstanding: a flush has nothing to wait for.
    void* request = reinterpret_cast<void*>(1);
    RT_CALL("iflush", session.table().flush(target, 0, window_mr, 0, &request));
    if (request != nullptr) RT_TRY(session.wait(target, request, "idle iflush"));
    RT_TRY(session.barrier(target));
    RT_TRY(regions.release());
    RT_CALL("destroyContext", session.table().destroy_context(target));
    return "";
  });
}

// GPU memory (hidden: run by the flavours that set WEFT_TEST_EXPECT_GPU,
// with the CUDA driver first on the library path, softcuda in CI):
//   1  the device reports NCCL_PTR_CUDA: puts from and into device memory,
//      each followed by a signal into host memory, and gets into device
//      memory after iflush, every byte checked through the driver (the
//      host never reads device memory: SOFTCUDA_PROTECT makes it fault);
//   0  the device reports host memory only, and registering device memory
//      fails with an error on every rank instead of crashing.
TEST_CASE("device memory carries puts and gets, signals in host memory", "[.][rma][gpu]") {
  run_ranks([](Session& session, Team& team) -> std::string {
    const char* expect = std::getenv("WEFT_TEST_EXPECT_GPU");
    if (expect == nullptr) return "WEFT_TEST_EXPECT_GPU is not set (0 or 1)";
    std::string reason;
    auto driver = cuda::Driver::open("libcuda.so.1", &reason);
    if (!driver) return "no CUDA driver for the test: " + reason;
    const bool gpu = (session.ptr_support() & NCCL_PTR_CUDA) != 0;
    if (gpu != (std::string(expect) == "1")) {
      return std::string("ptrSupport ") + (gpu ? "has" : "lacks") +
             " NCCL_PTR_CUDA, WEFT_TEST_EXPECT_GPU=" + expect;
    }
    const size_t largest = std::min<size_t>(largest_transfer(), size_t{4} << 20);
    const int n = team.size();
    const int me = team.rank();
    struct DeviceMemory {
      const cuda::Driver& driver;
      void* data = nullptr;
      DeviceMemory(const cuda::Driver& d, size_t size) : driver(d) {
        std::string error;
        if (!driver.alloc(size, 0, &data, &error)) data = nullptr;
      }
      ~DeviceMemory() {
        std::string error;
        if (data != nullptr) driver.free(data, &error);
      }
    };
    DeviceMemory source(*driver, largest);
    DeviceMemory window(*driver, largest * n);
    if (source.data == nullptr || window.data == nullptr) return "cuMemAlloc failed";
    HostBuffer signals(8 * 64);
    HostBuffer host(largest * n);
    void* source_mr = nullptr;
    void* window_mr = nullptr;
    void* signals_mr = nullptr;
    if (!gpu) {
      // Every rank refuses, and none waits for the others in vain.
      ncclResult_t r = session.table().reg(session.comm(), window.data, largest * n, NCCL_PTR_CUDA,
                                           0, &window_mr);
      if (r == ncclSuccess) return "regMrSym of device memory succeeded without NCCL_PTR_CUDA";
      return "";
    }
    RmaTarget target;
    RT_TRY(session.make_target(1, &target));
    Regions regions(session);
    RT_TRY(regions.add(source.data, largest, &source_mr, NCCL_PTR_CUDA));
    RT_TRY(regions.add(window.data, largest * n, &window_mr, NCCL_PTR_CUDA));
    RT_TRY(regions.add(signals, &signals_mr));
    std::string error;
    uint32_t salt = 40;
    size_t last = 0;  // the size of the last puts
    for (size_t size : transfer_sizes()) {
      if (size > largest || size == 0) continue;
      ++salt;
      last = size;
      for (int peer = 0; peer < n; ++peer) {
        fill_pattern(host.data, size, me, peer, salt);
        if (!driver->copy_to_device(source.data, host.data, size, &error)) return error;
        void* request = nullptr;
        RT_CALL("iputSignal",
                session.table().put_signal(target, 0, 0, source_mr, size,
                                           static_cast<uint64_t>(me) * largest, window_mr,
                                           static_cast<uint32_t>(peer), 8 * (salt % 64), signals_mr,
                                           1, NCCL_NET_SIGNAL_OP_ADD, true, &request));
        RT_TRY(session.wait(target, request, "iputSignal"));
      }
      RT_TRY(session.wait_signal(target, signals.data + 8 * (salt % 64), static_cast<uint64_t>(n),
                                 "signals of puts into device memory"));
      if (!driver->copy_to_host(host.data, window.data, largest * n, &error)) return error;
      for (int sender = 0; sender < n; ++sender) {
        error = check_pattern(host.data + static_cast<size_t>(sender) * largest, size, sender, me,
                              salt);
        if (!error.empty()) return "put into device memory: " + error;
      }
      RT_TRY(session.barrier(target));
    }
    if (session.table().has_get() && last > 0) {
      // Each rank's window now holds, at every sender's place, what that
      // sender put last: read it back from every peer into the source.
      const size_t size = last;
      for (int peer = 0; peer < n; ++peer) {
        void* request = nullptr;
        RT_CALL("iget",
                session.table().get(target, 0, static_cast<uint64_t>(me) * largest, window_mr, size,
                                    0, source_mr, static_cast<uint32_t>(peer), &request));
        RT_TRY(session.wait(target, request, "iget"));
        RT_CALL("iflush",
                session.table().flush(target, 0, source_mr, static_cast<uint32_t>(peer), &request));
        if (request != nullptr) RT_TRY(session.wait(target, request, "iflush"));
        if (!driver->copy_to_host(host.data, source.data, size, &error)) return error;
        error = check_pattern(host.data, size, me, peer, salt);
        if (!error.empty())
          return "get into device memory from rank " + std::to_string(peer) + ": " + error;
      }
      RT_TRY(session.barrier(target));
    }
    RT_TRY(regions.release());
    RT_CALL("destroyContext", session.table().destroy_context(target));
    return "";
  });
}

TEST_CASE("many context blocks and contexts carry their own signals", "[rma][contexts]") {
  run_ranks([](Session& session, Team& team) -> std::string {
    if (!session.table().has_contexts()) return "";  // GIN v11/v12: the comm only
    constexpr int kBlocks = 8;
    constexpr int kContexts = 4;
    constexpr size_t kSlot = 4096;
    const int n = team.size();
    const int me = team.rank();
    const int next = (me + 1) % n;
    const int previous = (me + n - 1) % n;
    std::vector<RmaTarget> targets(kBlocks);
    for (RmaTarget& target : targets) RT_TRY(session.make_target(kContexts, &target));
    HostBuffer source(kSlot * kBlocks * kContexts);
    HostBuffer window(kSlot * kBlocks * kContexts);
    HostBuffer signals(8 * kBlocks * kContexts);
    void* source_mr = nullptr;
    void* window_mr = nullptr;
    void* signals_mr = nullptr;
    Regions regions(session);
    RT_TRY(regions.add(source, &source_mr));
    RT_TRY(regions.add(window, &window_mr));
    RT_TRY(regions.add(signals, &signals_mr));
    fill_pattern(source.data, source.size, me, next, 9);
    std::vector<std::pair<int, void*>> requests;
    for (int block = 0; block < kBlocks; ++block) {
      for (int context = 0; context < kContexts; ++context) {
        int slot = block * kContexts + context;
        void* request = nullptr;
        RT_CALL("iputSignal", session.table().put_signal(
                                  targets[block], context, kSlot * slot, source_mr, kSlot,
                                  kSlot * slot, window_mr, static_cast<uint32_t>(next), 8 * slot,
                                  signals_mr, 1, NCCL_NET_SIGNAL_OP_INC, true, &request));
        requests.emplace_back(block, request);
      }
    }
    for (auto& [block, request] : requests) {
      RT_TRY(session.wait(targets[block], request, "iputSignal"));
    }
    for (int slot = 0; slot < kBlocks * kContexts; ++slot) {
      RT_TRY(session.wait_signal(targets[slot / kContexts], signals.data + 8 * slot, 1, "INC"));
      if (load_signal(signals.data + 8 * slot) != 1) return "an INC signal added more than 1";
      const uint8_t* got = window.data + kSlot * slot;
      for (size_t i = 0; i < kSlot; ++i) {
        if (got[i] != pattern_byte(previous, me, kSlot * slot + i, 9)) {
          return "slot " + std::to_string(slot) + " byte " + std::to_string(i) + " differs";
        }
      }
    }
    RT_TRY(session.barrier(targets[0]));
    RT_TRY(regions.release());
    for (RmaTarget& target : targets) {
      RT_CALL("destroyContext", session.table().destroy_context(target));
    }
    return "";
  });
}

TEST_CASE("threads drive their own context blocks at once", "[rma][threads]") {
  run_ranks([](Session& session, Team& team) -> std::string {
    if (!session.table().has_contexts()) return "";  // NCCL drives v11/v12 from one thread
    constexpr int kThreads = 4;
    constexpr int kMessages = 200;
    constexpr size_t kSize = 8192;
    const int n = team.size();
    const int me = team.rank();
    const int next = (me + 1) % n;
    const int previous = (me + n - 1) % n;
    std::vector<RmaTarget> targets(kThreads);
    for (RmaTarget& target : targets) RT_TRY(session.make_target(1, &target));
    HostBuffer source(kSize * kThreads);
    HostBuffer window(kSize * kThreads * kMessages);
    HostBuffer signals(8 * kThreads);
    void* source_mr = nullptr;
    void* window_mr = nullptr;
    void* signals_mr = nullptr;
    Regions regions(session);
    RT_TRY(regions.add(source, &source_mr));
    RT_TRY(regions.add(window, &window_mr));
    RT_TRY(regions.add(signals, &signals_mr));
    std::vector<std::string> errors(kThreads);
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        for (int m = 0; m < kMessages && errors[t].empty(); ++m) {
          // Each message's bytes differ: the source is refilled once the last put is done.
          fill_pattern(source.data + kSize * t, kSize, me, next, 1000 * t + m);
          void* request = nullptr;
          uint64_t at = kSize * (static_cast<size_t>(t) * kMessages + m);
          ncclResult_t r =
              session.table().put_signal(targets[t], 0, kSize * t, source_mr, kSize, at, window_mr,
                                         static_cast<uint32_t>(next), 8 * t, signals_mr, 1,
                                         NCCL_NET_SIGNAL_OP_ADD, true, &request);
          if (r != ncclSuccess) {
            errors[t] = failed_call("iputSignal", r);
            break;
          }
          errors[t] = session.wait(targets[t], request, "iputSignal");
        }
        if (errors[t].empty()) {
          errors[t] = session.wait_signal(targets[t], signals.data + 8 * t, kMessages, "thread");
        }
      });
    }
    for (std::thread& thread : threads) thread.join();
    for (const std::string& error : errors) RT_TRY(error);
    for (int t = 0; t < kThreads; ++t) {
      for (int m = 0; m < kMessages; ++m) {
        const uint8_t* got = window.data + kSize * (static_cast<size_t>(t) * kMessages + m);
        std::string error = check_pattern(got, kSize, previous, me, 1000 * t + m);
        if (!error.empty()) {
          return "thread " + std::to_string(t) + " message " + std::to_string(m) + ": " + error;
        }
      }
    }
    RT_TRY(session.barrier(targets[0]));
    RT_TRY(regions.release());
    for (RmaTarget& target : targets) {
      RT_CALL("destroyContext", session.table().destroy_context(target));
    }
    return "";
  });
}

TEST_CASE("a one-sided comm holds resources only for the ranks it talks to", "[.][rma][lazy]") {
  // 16 ranks; each talks to two (rank ^ 1 and rank ^ 2, so each is talked
  // to by the same two). What connect, registration and a context cost
  // must not grow with the ranks; two peers' traffic may add two peers'
  // worth. Then every rank talks to every rank: the count must grow, or it
  // does not see peers on this provider and proves nothing.
  constexpr int kRanks = 16;
  require_passed(run_team(
      kRanks,
      [](Team& team) -> std::string {
        const int n = team.size();
        const int me = team.rank();
        HostBuffer source(4096 * n);
        HostBuffer window(4096 * n);
        HostBuffer signals(8 * n);
        Session session(team);
        PeerResources before;
        RT_TRY(session.open([&] { before = count_resources(); }));
        RmaTarget target;
        RT_TRY(session.make_target(1, &target));
        void* source_mr = nullptr;
        void* window_mr = nullptr;
        void* signals_mr = nullptr;
        Regions regions(session);
        RT_TRY(regions.add(source, &source_mr));
        RT_TRY(regions.add(window, &window_mr));
        RT_TRY(regions.add(signals, &signals_mr));
        RT_TRY(session.barrier(target));
        const PeerResources setup = count_resources();
        const std::vector<int> two = {me ^ 1, me ^ 2};
        RT_TRY(put_to_peers(session, target, source, source_mr, window, window_mr, signals,
                            signals_mr, two, two, 1));
        RT_TRY(session.barrier(target));
        const PeerResources talked = count_resources();
        std::vector<int> others;
        for (int r = 0; r < n; ++r) {
          if (r != two[0] && r != two[1]) others.push_back(r);
        }
        RT_TRY(put_to_peers(session, target, source, source_mr, window, window_mr, signals,
                            signals_mr, others, others, 1));
        RT_TRY(session.barrier(target));
        const PeerResources all = count_resources();
        RT_TRY(regions.release());
        RT_CALL("destroyContext", session.table().destroy_context(target));
        std::string counts = "before " + before.text() + "; after setup " + setup.text() +
                             "; after two peers " + talked.text() + "; after all " + all.text();
        if (std::getenv("WEFT_TEST_RMA_LOG") != nullptr) {
          std::fprintf(stderr, "rank %d: %s\n", me, counts.c_str());
        }
        // What one more peer costs here (sockets, queue pairs, mappings:
        // 1 to 3 on the providers here), from the 13 met last.
        const double per_peer = (all.total() - talked.total()) / 13.0;
        // Setup may cost a few of its own (an epoll set, a completion
        // queue) and about a peer's worth (verbs: the queue pair to itself);
        // meeting all 15 at connect costs 15.
        if (setup.total() - before.total() > 4 + std::max(per_peer, 1.0)) {
          return "connect and registration hold per-peer resources: " + counts;
        }
        if (all.total() - talked.total() < 8) {
          return "talking to 13 more ranks added almost nothing, so the count sees no peers on "
                 "this provider: " +
                 counts;
        }
        // A peer costs up to 3 (softverbs: a socket and its NIC model's
        // two); which end opens what varies, so the last 13 may average less.
        if (talked.total() - setup.total() > 2 * std::max(per_peer, 3.0) + 2) {
          return "two peers' traffic holds more than two peers' resources: " + counts;
        }
        return session.close();
      },
      300));
}

TEST_CASE("bad arguments are refused with ncclInvalidArgument", "[rma][errors]") {
  run_ranks([](Session& session, Team& team) -> std::string {
    RmaTarget target;
    RT_TRY(session.make_target(2, &target));
    HostBuffer buffer(4096);
    void* mr = nullptr;
    Regions regions(session);
    RT_TRY(regions.add(buffer, &mr));
    const uint32_t n = static_cast<uint32_t>(team.size());
    const RmaClient& table = session.table();
    // What a stray handle or context pointer might hold: zeroed bytes,
    // enough for any header weft reads to tell them from its own. (Comms
    // are C++ objects: a forged one is undefined behaviour to even check.)
    alignas(64) static unsigned char stranger_bytes[256] = {};
    void* stranger = stranger_bytes;
    auto expect_invalid = [&](const char* what, ncclResult_t result, void* request) {
      if (result != ncclInvalidArgument) {
        return std::string(what) + ": returned " + std::to_string(result) +
               ", expected ncclInvalidArgument (4)";
      }
      if (request != nullptr) return std::string(what) + ": a request came back with the error";
      return std::string();
    };
    void* request = nullptr;
    RT_TRY(expect_invalid("iput to rank n", table.put(target, 0, 0, mr, 8, 0, mr, n, &request),
                          request));
    RT_TRY(expect_invalid("iput past the source region",
                          table.put(target, 0, 4090, mr, 8, 0, mr, 0, &request), request));
    RT_TRY(expect_invalid("iput past the destination region",
                          table.put(target, 0, 0, mr, 8, 4089, mr, 0, &request), request));
    RT_TRY(expect_invalid("iput with a foreign handle",
                          table.put(target, 0, 0, stranger, 8, 0, mr, 0, &request), request));
    RT_TRY(expect_invalid(
        "iputSignal with operation 7",
        table.put_signal(target, 0, 0, mr, 8, 0, mr, 0, 0, mr, 1, 7, true, &request), request));
    RT_TRY(expect_invalid("iputSignal to an unaligned word",
                          table.put_signal(target, 0, 0, mr, 8, 0, mr, 0, 4, mr, 1,
                                           NCCL_NET_SIGNAL_OP_INC, true, &request),
                          request));
    RT_TRY(expect_invalid("iputSignal past the signal region",
                          table.put_signal(target, 0, 0, nullptr, 0, 0, nullptr, 0, 4096, mr, 1,
                                           NCCL_NET_SIGNAL_OP_INC, true, &request),
                          request));
    if (table.has_contexts()) {
      RT_TRY(expect_invalid("iput on context 2 of 2",
                            table.put(target, 2, 0, mr, 8, 0, mr, 0, &request), request));
      RmaTarget forged{session.comm(), stranger};
      RT_TRY(expect_invalid("iput on a forged context",
                            table.put(forged, 0, 0, mr, 8, 0, mr, 0, &request), request));
    }
    int done = 0;
    RT_TRY(expect_invalid("test of a NULL request", table.test(session.comm(), nullptr, &done),
                          nullptr));
    RT_TRY(expect_invalid("deregMrSym of a foreign handle", table.dereg(session.comm(), stranger),
                          nullptr));
    RT_TRY(expect_invalid("regMrSym of nothing",
                          table.reg(session.comm(), nullptr, 0, NCCL_PTR_HOST, 0, &request),
                          request));
    const uint32_t me = static_cast<uint32_t>(team.rank());
    if (table.version() >= 15) {
      // optFlags: bits beyond "aggregate requests" are refused.
      RmaClient& flagged = session.mutable_table();
      flagged.set_opt_flags(0x2);
      RT_TRY(expect_invalid("iput with optFlags 0x2",
                            flagged.put(target, 0, 0, mr, 8, 0, mr, me, &request), request));
      RT_TRY(expect_invalid("iget with optFlags 0x2",
                            flagged.get(target, 0, 0, mr, 8, 0, mr, me, &request), request));
      // The good put below asks for aggregation, which changes nothing.
      flagged.set_opt_flags(NCCL_RMA_OPT_FLAGS_AGGREGATE_REQUESTS);
    }
    if (table.has_rma_properties()) {
      bool flushes_all = true;
      RT_CALL("getRmaProperties", table.rma_properties(session.comm(), &flushes_all));
      // A signal covers its own channel's puts only.
      if (flushes_all) return "getRmaProperties says any signal flushes every put";
    }
    if (table.version() == 17) {
      // A context of this rank alone: another rank is not one of its peers.
      RmaTarget alone;
      RT_CALL("createContext",
              table.create_context_with_peers(session.comm(), 1, {static_cast<int>(me)}, &alone));
      if (n > 1) {
        RT_TRY(expect_invalid("iput to a rank outside the context's peers",
                              table.put(alone, 0, 0, mr, 8, 0, mr, (me + 1) % n, &request),
                              request));
      }
      RT_CALL("destroyContext", table.destroy_context(alone));
      RmaTarget bad;
      RT_TRY(expect_invalid(
          "createContext with peer n",
          table.create_context_with_peers(session.comm(), 1, {static_cast<int>(n)}, &bad),
          bad.context));
    }
    // Still usable: an 8-byte put to itself.
    fill_pattern(buffer.data, 8, team.rank(), team.rank(), 3);
    RT_CALL("iput", table.put(target, 0, 0, mr, 8, 64, mr, me, &request));
    RT_TRY(session.wait(target, request, "iput to itself"));
    RT_TRY(check_pattern(buffer.data + 64, 8, team.rank(), team.rank(), 3));
    session.mutable_table().set_opt_flags(0);
    RT_TRY(session.barrier(target));
    RT_TRY(regions.release());
    RT_CALL("destroyContext", table.destroy_context(target));
    return "";
  });
}

TEST_CASE("a rank's handles out of order fail connect on every rank", "[rma][errors]") {
  require_passed(run_team(
      team_size(),
      [](Team& team) -> std::string {
        RmaClient table;
        std::string error;
        if (!table.load(ft::plugin_path(), table_under_test(), &error)) return error;
        void* context = nullptr;
        RT_CALL("init", table.init(&context, log_sink));
        void* listen = nullptr;
        RT_CALL("listen", table.listen(context, 0, team.handle(team.rank()), &listen));
        if (!team.barrier()) return "barrier timed out";
        // Every rank passes the handles rotated by one: none is where it belongs.
        std::vector<void*> handles(static_cast<size_t>(team.size()));
        for (int r = 0; r < team.size(); ++r) handles[r] = team.handle((r + 1) % team.size());
        void* comm = nullptr;
        ncclResult_t r =
            table.connect(context, handles.data(), team.size(), team.rank(), listen, &comm);
        table.close_listen(listen);
        if (r != ncclInvalidArgument) {
          return "connect with rotated handles returned " + std::to_string(r) +
                 ", expected ncclInvalidArgument (4)";
        }
        if (comm != nullptr) return "connect failed and returned a comm";
        // A corrupt handle is refused too.
        unsigned char corrupt[kHandleBytes] = {0x57, 0x46, 0x54, 0x39};
        handles.assign(static_cast<size_t>(team.size()), corrupt);
        void* own_listen = nullptr;
        RT_CALL("listen", table.listen(context, 0, team.handle(team.rank()), &own_listen));
        handles[team.rank()] = team.handle(team.rank());
        if (team.size() > 1) {
          r = table.connect(context, handles.data(), team.size(), team.rank(), own_listen, &comm);
          if (r != ncclInvalidArgument) {
            return "connect with corrupt handles returned " + std::to_string(r);
          }
        }
        table.close_listen(own_listen);
        table.finalize(context);
        return "";
      },
      300));
}

TEST_CASE("a dead rank fails the next collective step or operation within the timeout",
          "[rma][death]") {
  // Rank 2 of 3 dies after connecting. A transport that trades windows at
  // registration fails the others' regMrSym, naming it; one that learns
  // them on demand fails their first put to it instead. Either way in
  // bounded time, never a hang.
  std::vector<std::vector<std::string>> environment(3, {"WEFT_CONNECT_TIMEOUT_MS=3000"});
  require_passed(run_team(
      3,
      [](Team& team) -> std::string {
        Session session(team);
        RT_TRY(session.open());
        RmaTarget target;
        RT_TRY(session.make_target(1, &target));
        if (!team.barrier()) return "barrier timed out";
        if (team.rank() == 2) ::_exit(0);  // no close, no finalize: gone
        ::usleep(200 * 1000);
        HostBuffer buffer(4096);
        void* mr = nullptr;
        auto start = std::chrono::steady_clock::now();
        auto elapsed = [&] {
          return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        };
        ncclResult_t r =
            session.table().reg(session.comm(), buffer.data, buffer.size, NCCL_PTR_HOST, 0, &mr);
        if (r == ncclSuccess) {
          void* request = nullptr;
          r = session.table().put_signal(target, 0, 0, mr, 64, 0, mr, 2, 64, mr, 1,
                                         NCCL_NET_SIGNAL_OP_ADD, true, &request);
          if (r == ncclSuccess) {
            std::string waited = session.wait(target, request, "iputSignal to the dead rank", 60);
            if (waited.empty()) return "a put and signal to a dead rank completed";
            if (waited.find("not done after") != std::string::npos) return waited;
          }
          RT_CALL("deregMrSym", session.table().dereg(session.comm(), mr));
        }
        if (elapsed() > 30) return "the dead rank took " + std::to_string(elapsed()) + " s to see";
        RT_CALL("destroyContext", session.table().destroy_context(target));
        return session.close();
      },
      120, environment));
}

TEST_CASE("an impostor who poses as a rank, with a handle of its own, is never let in",
          "[rma][impostor]") {
  // Ranks 0 and 1 form a comm of two. Rank 2, the impostor, knows rank 1's
  // handle and weft's setup protocol: it connects as "rank 0" with a comm
  // of its own handle and rank 1's, registers and puts to rank 1. Its setup
  // messages carry its own secret, not rank 0's, so rank 1 drops them: the
  // genuine comm connects, registers and moves bytes as if it were not
  // there, and the impostor fails (at connect, or at the put, by its
  // timeout), never writing into rank 1's memory.
  std::vector<std::vector<std::string>> environment(3, {"WEFT_CONNECT_TIMEOUT_MS=20000"});
  environment[2] = {"WEFT_CONNECT_TIMEOUT_MS=3000"};
  require_passed(run_team(
      3,
      [](Team& team) -> std::string {
        RmaClient table;
        std::string error;
        if (!table.load(ft::plugin_path(), table_under_test(), &error)) return error;
        void* context = nullptr;
        RT_CALL("init", table.init(&context, log_sink));
        void* listen = nullptr;
        RT_CALL("listen", table.listen(context, 0, team.handle(team.rank()), &listen));
        if (!team.barrier()) return "barrier timed out";
        std::string failure;
        std::vector<uint8_t> region(1 << 16, 0);
        auto untouched = [&] {
          for (uint8_t byte : region)
            if (byte != 0) return false;
          return true;
        };
        if (team.rank() == 2) {
          std::vector<void*> handles = {team.handle(2), team.handle(1)};
          void* comm = nullptr;
          ncclResult_t r = table.connect(context, handles.data(), 2, 0, listen, &comm);
          if (r == ncclSuccess) {
            // On demand: the put is where rank 1 is first asked.
            void* mhandle = nullptr;
            RmaTarget target;
            RT_CALL("regMrSym",
                    table.reg(comm, region.data(), region.size(), NCCL_PTR_HOST, 0, &mhandle));
            RT_CALL("createContext", table.create_context(comm, 1, 2, &target));
            std::fill(region.begin(), region.end(), 0xee);
            void* request = nullptr;
            r = table.put_signal(target, 0, 0, mhandle, 4096, 0, mhandle, 1, 8192, mhandle, 1,
                                 NCCL_NET_SIGNAL_OP_ADD, true, &request);
            auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(60);
            int done = 0;
            while (r == ncclSuccess && !done && std::chrono::steady_clock::now() < give_up) {
              r = table.test(comm, request, &done);
              if (r == ncclSuccess && !done) r = table.progress(target);
            }
            if (r == ncclSuccess) {
              failure = done ? "the impostor's put to rank 1 completed: rank 1 let it in"
                             : "the impostor's put neither failed nor completed in 60 s";
            }
            RT_CALL("destroyContext", table.destroy_context(target));
            RT_CALL("deregMrSym", table.dereg(comm, mhandle));
            RT_CALL("closeColl", table.close_coll(comm));
          }
        } else {
          // After the impostor's first setup messages are on their way.
          std::this_thread::sleep_for(std::chrono::milliseconds(500));
          std::vector<void*> handles = {team.handle(0), team.handle(1)};
          void* comm = nullptr;
          RT_CALL("connect", table.connect(context, handles.data(), 2, team.rank(), listen, &comm));
          void* mhandle = nullptr;
          RT_CALL("regMrSym",
                  table.reg(comm, region.data(), region.size(), NCCL_PTR_HOST, 0, &mhandle));
          RmaTarget target;
          RT_CALL("createContext", table.create_context(comm, 1, 2, &target));
          // Rank 0 puts a block and a signal to rank 1, which waits for it
          // while the impostor's messages arrive.
          auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(60);
          if (team.rank() == 0) {
            fill_pattern(region.data(), 4096, 0, 1, 9);
            void* request = nullptr;
            RT_CALL("iputSignal",
                    table.put_signal(target, 0, 0, mhandle, 4096, 4096, mhandle, 1, 16384, mhandle,
                                     1, NCCL_NET_SIGNAL_OP_ADD, true, &request));
            int done = 0;
            while (!done && std::chrono::steady_clock::now() < give_up) {
              RT_CALL("test", table.test(comm, request, &done));
              RT_CALL("progress", table.progress(target));
            }
            if (!done) failure = "rank 0's put to rank 1 did not complete in 60 s";
          } else {
            while (load_signal(region.data() + 16384) == 0 &&
                   std::chrono::steady_clock::now() < give_up) {
              RT_CALL("progress", table.progress(target));
            }
            if (load_signal(region.data() + 16384) != 1) {
              failure = "rank 0's signal did not arrive at rank 1";
            } else {
              failure = check_pattern(region.data() + 4096, 4096, 0, 1, 9);
              region[16384] = 0;
              std::fill(region.begin() + 4096, region.begin() + 8192, 0);
              if (failure.empty() && !untouched()) {
                failure = "rank 1's region holds bytes nobody of its comm wrote";
              }
            }
          }
          if (!team.barrier()) return "barrier timed out";
          RT_CALL("destroyContext", table.destroy_context(target));
          RT_CALL("deregMrSym", table.dereg(comm, mhandle));
          RT_CALL("closeColl", table.close_coll(comm));
        }
        if (team.rank() == 2 && !team.barrier()) return "barrier timed out";
        if (!team.barrier()) return "barrier timed out";
        table.close_listen(listen);
        table.finalize(context);
        return failure;
      },
      300, environment));
}

}  // namespace weft::rt
