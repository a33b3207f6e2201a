// libnccl-rma-faulty.so: a fixture for the one-sided suite. It exports
// ncclRmaPlugin_v14 by forwarding every call to another plugin's
// (WEFT_FAULTY_TARGET, a path) and breaks one rule, chosen by
// WEFT_FAULTY_RMA_DEFECT, so ctest shows each check of weft-rma-tests fails
// when its rule is broken. Not for use with NCCL.
#include <dlfcn.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "nccl/one_sided.h"

extern "C" __attribute__((visibility("default"))) ncclRma_v14_t ncclRmaPlugin_v14;
ncclRma_v14_t ncclRmaPlugin_v14{};

namespace {

enum class Defect {
  kNone,
  kSignalFirst,   // the signal goes before the data it covers
  kLoseSignal,    // iputSignal moves the data and drops the signal
  kNullRequest,   // iput returns success with no request
  kHostDevice,    // getProperties says NCCL_NET_DEVICE_HOST
  kWrapRank,      // a rank past the comm is taken modulo the comm
  kSkewedGet,     // iget reads 1 byte further on than asked
  kMeetEveryone,  // connect reads from every rank before it returns
};

Defect g_defect = Defect::kNone;
const ncclRma_v14_t* g_target = nullptr;
void* g_last_comm = nullptr;  // the suite's ranks have one comm each

Defect parse_defect() {
  const char* name = std::getenv("WEFT_FAULTY_RMA_DEFECT");
  std::string value = name != nullptr ? name : "";
  if (value == "signal-first") return Defect::kSignalFirst;
  if (value == "lose-signal") return Defect::kLoseSignal;
  if (value == "null-request") return Defect::kNullRequest;
  if (value == "host-device") return Defect::kHostDevice;
  if (value == "wrap-rank") return Defect::kWrapRank;
  if (value == "skewed-get") return Defect::kSkewedGet;
  if (value == "meet-everyone") return Defect::kMeetEveryone;
  if (!value.empty()) std::fprintf(stderr, "faulty rma: unknown defect '%s'\n", value.c_str());
  return Defect::kNone;
}

bool load_target() {
  if (g_target != nullptr) return true;
  const char* path = std::getenv("WEFT_FAULTY_TARGET");
  void* library = path != nullptr ? ::dlopen(path, RTLD_NOW | RTLD_LOCAL) : nullptr;
  if (library == nullptr) {
    std::fprintf(stderr, "faulty rma: cannot load WEFT_FAULTY_TARGET\n");
    return false;
  }
  g_target = static_cast<const ncclRma_v14_t*>(::dlsym(library, "ncclRmaPlugin_v14"));
  g_defect = parse_defect();
  return g_target != nullptr;
}

ncclResult_t init(void** ctx, uint64_t comm_id, ncclDebugLogger_t logger) {
  if (!load_target()) return ncclSystemError;
  return g_target->init(ctx, comm_id, logger);
}

ncclResult_t get_properties(int dev, ncclNetProperties_v12_t* props) {
  ncclResult_t result = g_target->getProperties(dev, props);
  if (g_defect == Defect::kHostDevice) props->netDeviceType = NCCL_NET_DEVICE_HOST;
  return result;
}

// An eager connect, as full-mesh plugins do: 8 bytes read from every rank
// through a region of the fixture's own, so the provider meets them all.
ncclResult_t meet_everyone(void* comm, int nranks) {
  static uint64_t word = 0;
  void* mr = nullptr;
  ncclResult_t result = g_target->regMrSym(comm, &word, sizeof word, NCCL_PTR_HOST, 0, &mr);
  if (result != ncclSuccess) return result;
  ncclRmaConfig_v14_t config{1, -1, 1};
  void* context = nullptr;
  result = g_target->createContext(comm, &config, &context);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  for (int r = 0; r < nranks && result == ncclSuccess; ++r) {
    void* request = nullptr;
    result =
        g_target->iget(context, 0, 0, mr, sizeof word, 0, mr, static_cast<uint32_t>(r), &request);
    for (int done = 0; result == ncclSuccess && !done;) {
      result = g_target->test(comm, request, &done);
      if (result == ncclSuccess) result = g_target->rmaProgress(context);
      if (std::chrono::steady_clock::now() > deadline) result = ncclSystemError;
    }
  }
  // Every rank answers the others' reads until all are done.
  for (auto until = std::chrono::steady_clock::now() + std::chrono::seconds(1);
       result == ncclSuccess && std::chrono::steady_clock::now() < until;) {
    result = g_target->rmaProgress(context);
  }
  if (context != nullptr) g_target->destroyContext(context);
  g_target->deregMrSym(comm, mr);
  return result;
}

ncclResult_t connect(void* ctx, void* handles[], int nranks, int rank, void* listen, void** comm) {
  ncclResult_t result = g_target->connect(ctx, handles, nranks, rank, listen, comm);
  g_last_comm = *comm;
  if (result == ncclSuccess && g_defect == Defect::kMeetEveryone) {
    result = meet_everyone(*comm, nranks);
  }
  return result;
}

uint32_t wrap(uint32_t rank) {
  // The suite runs four ranks.
  return g_defect == Defect::kWrapRank ? rank % 4 : rank;
}

ncclResult_t iput(void* ctx, int context, uint64_t src_off, void* src, size_t size,
                  uint64_t dst_off, void* dst, uint32_t rank, void** request) {
  ncclResult_t result =
      g_target->iput(ctx, context, src_off, src, size, dst_off, dst, wrap(rank), request);
  if (g_defect == Defect::kNullRequest && result == ncclSuccess) *request = nullptr;
  return result;
}

ncclResult_t iput_signal(void* ctx, int context, uint64_t src_off, void* src, size_t size,
                         uint64_t dst_off, void* dst, uint32_t rank, uint64_t signal_off,
                         void* signal, uint64_t value, uint32_t op, bool strong, void** request) {
  if (g_defect == Defect::kLoseSignal) {
    return g_target->iput(ctx, context, src_off, src, size, dst_off, dst, rank, request);
  }
  if (g_defect == Defect::kSignalFirst && size > 0) {
    // The signal alone first, then its data.
    void* ahead = nullptr;
    ncclResult_t result = g_target->iputSignal(ctx, context, 0, nullptr, 0, 0, nullptr, rank,
                                               signal_off, signal, value, op, false, &ahead);
    // Given time to land (the target must be polling too: at most 20 ms),
    // and its request never waited for again.
    auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(20);
    for (int done = 0; result == ncclSuccess && !done;) {
      result = g_target->test(g_last_comm, ahead, &done);
      if (std::chrono::steady_clock::now() > deadline) break;
    }
    if (result != ncclSuccess) return result;
    return g_target->iput(ctx, context, src_off, src, size, dst_off, dst, rank, request);
  }
  return g_target->iputSignal(ctx, context, src_off, src, size, dst_off, dst, wrap(rank),
                              signal_off, signal, value, op, strong, request);
}

ncclResult_t iget(void* ctx, int context, uint64_t remote_off, void* remote, size_t size,
                  uint64_t local_off, void* local, uint32_t rank, void** request) {
  if (g_defect == Defect::kSkewedGet && size > 1) remote_off += 1, size -= 1;
  return g_target->iget(ctx, context, remote_off, remote, size, local_off, local, rank, request);
}

// The table: the target's members, with the hooks above in place.
struct Install {
  Install() {
    ncclRma_v14_t& t = ncclRmaPlugin_v14;
    t.name = "weft-faulty";
    t.init = init;
    t.devices = [](int* n) { return g_target->devices(n); };
    t.getProperties = get_properties;
    t.listen = [](void* c, int d, void* h, void** l) { return g_target->listen(c, d, h, l); };
    t.connect = connect;
    t.createContext = [](void* c, ncclRmaConfig_v14_t* cfg, void** x) {
      return g_target->createContext(c, cfg, x);
    };
    t.regMrSym = [](void* c, void* d, size_t s, int ty, uint64_t f, void** m) {
      return g_target->regMrSym(c, d, s, ty, f, m);
    };
    t.regMrSymDmaBuf = [](void* c, void* d, size_t s, int ty, uint64_t o, int fd, uint64_t f,
                          void** m) { return g_target->regMrSymDmaBuf(c, d, s, ty, o, fd, f, m); };
    t.deregMrSym = [](void* c, void* m) { return g_target->deregMrSym(c, m); };
    t.destroyContext = [](void* x) { return g_target->destroyContext(x); };
    t.closeColl = [](void* c) { return g_target->closeColl(c); };
    t.closeListen = [](void* l) { return g_target->closeListen(l); };
    t.iput = iput;
    t.iputSignal = iput_signal;
    t.iget = iget;
    t.iflush = [](void* x, int c, void* m, uint32_t r, void** q) {
      return g_target->iflush(x, c, m, r, q);
    };
    t.test = [](void* c, void* q, int* d) { return g_target->test(c, q, d); };
    t.rmaProgress = [](void* x) { return g_target->rmaProgress(x); };
    t.queryLastError = [](void* x, bool* e) { return g_target->queryLastError(x, e); };
    t.finalize = [](void* c) { return g_target->finalize(c); };
  }
} g_install;

}  // namespace
