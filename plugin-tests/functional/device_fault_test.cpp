// Faults injected into a software device (softverbs' NIC model: softverbs
// under the native verbs transport, softefa under libfabric's efa provider)
// end in the right error from test() within a bounded time, on the rank
// that suffers them, and the peer rank ends too (error or success, never a
// hang); nothing crashes,
// and after close and finalize the rank holds no more fds or threads than
// after a clean init and finalize.
//   WEFT_TEST_FAULT       NAME=VALUE set in the faulty rank before init
//                         (a SOFTVERBS_FAULT_* knob), or "kill": the faulty
//                         rank exits once both ranks are connected
//   WEFT_TEST_FAULT_RANK  sender | receiver
//   WEFT_TEST_FAULT_EXPECT remote | system | ok: test()'s first result there
//                         (with "kill": on the surviving rank)
//   WEFT_TEST_FAULT_DELAY_MS  the sender waits this long before sending
#include <dirent.h>
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "net_ops.h"
#include "pattern.h"
#include "proc_usage.h"
#include "two_rank.h"

using namespace weft;
using namespace weft::ft;

namespace {

constexpr int kMessages = 16;
constexpr size_t kSize = 256 << 10;
constexpr auto kBound = std::chrono::seconds(20);

std::string env_or(const char* name, const char* fallback) {
  const char* value = std::getenv(name);
  return value != nullptr ? value : fallback;
}

ncclResult_t expected_result() {
  std::string expect = env_or("WEFT_TEST_FAULT_EXPECT", "remote");
  if (expect == "ok") return ncclSuccess;
  return expect == "system" ? ncclSystemError : ncclRemoteError;
}

// Posts everything, then tests each request until done or failed; returns
// the first error (ncclSuccess when all finished), within kBound.
ncclResult_t run_side(NetClient& c, void* comm, bool sender, std::vector<Buffer>& buffers,
                      std::vector<void*>& mhandles) {
  auto deadline = std::chrono::steady_clock::now() + kBound;
  std::vector<void*> requests(kMessages, nullptr);
  ncclResult_t first = ncclSuccess;
  for (int i = 0; i < kMessages && first == ncclSuccess; ++i) {
    while (requests[i] == nullptr) {
      void* data = buffers[i].data();
      size_t size = kSize;
      int tag = i;
      ncclResult_t res = sender ? c.isend(comm, data, size, tag, mhandles[i], &requests[i])
                                : c.irecv(comm, 1, &data, &size, &tag, &mhandles[i], &requests[i]);
      if (res != ncclSuccess) {
        first = res;
        break;
      }
      FT_REQUIRE(std::chrono::steady_clock::now() < deadline,
                 (sender ? "isend " : "irecv ") << i << " never accepted within the bound");
    }
  }
  for (int i = 0; i < kMessages; ++i) {
    while (requests[i] != nullptr) {
      int done = 0;
      int sizes[8] = {};
      ncclResult_t res = c.test(requests[i], &done, sizes);
      if (res != ncclSuccess) {
        if (first == ncclSuccess) first = res;
        requests[i] = nullptr;
        break;
      }
      if (done) {
        requests[i] = nullptr;
        if (!sender) check_received(buffers[i].data(), sizes[0], kSize, pattern_seed(9, i), "msg");
        break;
      }
      FT_REQUIRE(std::chrono::steady_clock::now() < deadline,
                 "request " << i << " neither finished nor failed within " << kBound.count()
                            << " s (a hang)");
    }
  }
  return first;
}

// weft names libfabric shm regions /dev/shm/weft-<pid>-..., and a process
// that dies without closing its endpoints leaves them behind (docs/known-issues.md). The survivor
// clears what its dead peer left, as an operator would on a node where a job was killed.
bool process_dead(pid_t pid) {
  if (kill(pid, 0) != 0 && errno == ESRCH) return true;
  // A zombie (the harness reaps it later) holds nothing open any more.
  FILE* stat = std::fopen(("/proc/" + std::to_string(pid) + "/stat").c_str(), "r");
  if (stat == nullptr) return true;
  char state = 0;
  const int fields = std::fscanf(stat, "%*d (%*[^)]) %c", &state);
  std::fclose(stat);
  return fields == 1 && state == 'Z';
}

void remove_regions_of(pid_t dead) {
  if (dead <= 0 || !process_dead(dead)) return;
  DIR* dir = opendir("/dev/shm");
  if (dir == nullptr) return;
  const std::string prefix = "weft-" + std::to_string(dead) + "-";
  while (dirent* entry = readdir(dir)) {
    if (std::strncmp(entry->d_name, prefix.c_str(), prefix.size()) == 0) {
      unlink(("/dev/shm/" + std::string(entry->d_name)).c_str());
    }
  }
  closedir(dir);
}

// Returns once the peer's end of the channel closed: its process exited.
void wait_for_exit(Channel& peer) {
  const auto deadline = std::chrono::steady_clock::now() + kBound;
  for (;;) {
    pollfd pfd{peer.fd(), POLLIN, 100};
    if (::poll(&pfd, 1, 100) > 0) {
      char byte;
      ssize_t got = ::read(peer.fd(), &byte, 1);
      if (got == 0 || (got < 0 && errno != EINTR && errno != EAGAIN)) return;
    }
    FT_REQUIRE(std::chrono::steady_clock::now() < deadline,
               "the killed rank did not exit within " << kBound.count() << " s");
  }
}

void side(Rank& rk, bool sender) {
  const std::string fault = env_or("WEFT_TEST_FAULT", "");
  const bool faulty = env_or("WEFT_TEST_FAULT_RANK", "sender") == (sender ? "sender" : "receiver");
  if (faulty && fault != "kill" && !fault.empty()) {
    size_t eq = fault.find('=');
    setenv(fault.substr(0, eq).c_str(), fault.substr(eq + 1).c_str(), 1);
  }
  // One clean init/finalize first: what a transport keeps for as long as
  // the plugin stays loaded is not the fault's. libfabric's efa provider
  // holds its device contexts (and softefa's NIC thread) until libfabric is
  // unloaded; the native verbs transport keeps nothing.
  auto c = load_plugin(12);
  FT_OK(c->init(nullptr));
  FT_OK(c->finalize());
  const ProcUsage before = proc_usage();
  FT_OK(c->init(nullptr));
  const int dev = test_device(*c);
  void* comm = sender ? send_side_connect(*c, dev, *rk.peer) : recv_side_connect(*c, dev, *rk.peer);
  // Both connected (a connect can finish on one side only), then the
  // faulty rank vanishes without closing anything.
  pid_t peer_pid = 0;
  if (fault == "kill") {
    rk.peer->send_u64(static_cast<uint64_t>(getpid()));
    peer_pid = static_cast<pid_t>(rk.peer->recv_u64());
    rk.peer->sync("connected");
  }
  if (faulty && fault == "kill") _exit(0);
  // WEFT_TEST_KILL_BEFORE_POSTING=1: the survivor posts only once the peer
  // is gone, as a rank idle between messages would. Otherwise it posts
  // while the peer dies.
  if (fault == "kill" && env_or("WEFT_TEST_KILL_BEFORE_POSTING", "0") == "1") {
    wait_for_exit(*rk.peer);
  }
  std::vector<Buffer> buffers;
  std::vector<void*> mhandles;
  for (int i = 0; i < kMessages; ++i) {
    buffers.emplace_back(kSize);
    if (sender) fill_pattern(buffers.back().data(), kSize, pattern_seed(9, i));
  }
  for (auto& buffer : buffers) {
    void* mh = nullptr;
    FT_OK(c->reg_mr(comm, buffer.data(), kSize, NCCL_PTR_HOST, &mh));
    mhandles.push_back(mh);
  }
  if (sender) {
    int delay = std::atoi(env_or("WEFT_TEST_FAULT_DELAY_MS", "0").c_str());
    std::this_thread::sleep_for(std::chrono::milliseconds(delay));
  }
  const auto posted = std::chrono::steady_clock::now();
  ncclResult_t result = run_side(*c, comm, sender, buffers, mhandles);
  if (fault == "kill" && !faulty) {
    // For the record (ctest -V): how long the survivor took to see it.
    auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
        std::chrono::steady_clock::now() - posted);
    std::fprintf(stderr, "surviving %s: result %d after %lld ms\n", sender ? "sender" : "receiver",
                 static_cast<int>(result), static_cast<long long>(ms.count()));
  }
  // A killed rank cannot report: its survivor must see the error.
  if (faulty || fault == "kill") {
    FT_REQUIRE(result == expected_result(), "the " << (faulty ? "faulty " : "surviving ")
                                                   << (sender ? "sender" : "receiver") << " got "
                                                   << result << ", expected " << expected_result());
  }
  for (void* mh : mhandles) c->dereg_mr(comm, mh);
  if (sender) {
    c->close_send(comm);
  } else {
    c->close_recv(comm);
  }
  FT_OK(c->finalize());
  if (fault == "kill" && !faulty) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (!process_dead(peer_pid) && std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    remove_regions_of(peer_pid);
  }
  // Nothing of the failed connection stays: no fd (device context, side
  // channel, completion channel) and no thread (softverbs' NIC).
  const ProcUsage after = proc_usage();
  // libfabric keeps its devices open until it is unloaded, and with them
  // the software NIC's Unix-socket connections to the peer's NIC.
  const bool device_kept = env_or("WEFT_TEST_DEVICE_KEPT", "0") == "1";
  const bool same_fds = device_kept
                            ? fds_besides_unix_sockets(after) == fds_besides_unix_sockets(before)
                            : after.fds == before.fds;
  FT_REQUIRE(same_fds && after.threads == before.threads,
             "after the fault, closing and finalize: "
                 << to_string(after) << ", after a clean init and finalize: " << to_string(before));
}

}  // namespace

TEST_CASE("an injected fault ends in the right error, bounded, on both ranks", "[fault]") {
  INFO("fault " << env_or("WEFT_TEST_FAULT", "(none)") << " on the "
                << env_or("WEFT_TEST_FAULT_RANK", "sender"));
  auto r = run_two([&](Rank& rk) { side(rk, false); }, [&](Rank& rk) { side(rk, true); });
  REQUIRE_RANKS(r);
}
