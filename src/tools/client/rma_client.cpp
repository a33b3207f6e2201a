#include "weft_client/rma_client.h"

#include <dlfcn.h>

#include <climits>
#include <type_traits>
#include <vector>

namespace weft {
namespace {

void quiet_logger(ncclDebugLogLevel, unsigned long, const char*, int, const char*, ...) {}

}  // namespace

bool RmaClient::load(const std::string& path, const std::string& which, std::string* error) {
  struct Choice {
    const char* name;
    const char* symbol;
    int version;
  };
  static constexpr Choice kChoices[] = {
      {"rma17", "ncclRmaPlugin_v17", 17}, {"rma16", "ncclRmaPlugin_v16", 16},
      {"rma15", "ncclRmaPlugin_v15", 15}, {"rma14", "ncclRmaPlugin_v14", 14},
      {"rma13", "ncclRmaPlugin_v13", 13}, {"gin13", "ncclGinPlugin_v13", 13},
      {"gin12", "ncclGinPlugin_v12", 12}, {"gin11", "ncclGinPlugin_v11", 11}};
  const Choice* choice = nullptr;
  for (const Choice& c : kChoices)
    if (which == c.name) choice = &c;
  if (choice == nullptr) {
    *error =
        "unknown table '" + which + "' (rma17, rma16, rma15, rma14, rma13, gin13, gin12, gin11)";
    return false;
  }
  void* library = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) {
    *error = std::string("dlopen: ") + ::dlerror();
    return false;
  }
  void* table = ::dlsym(library, choice->symbol);
  if (table == nullptr) {
    *error = path + " does not export " + choice->symbol;
    return false;
  }
  symbol_ = choice->symbol;
  version_ = choice->version;
  table_ = table;
  return true;
}

template <class F>
ncclResult_t RmaClient::visit(F&& f) const {
  switch (version_) {
    case 11:
      return f(static_cast<const ncclGin_v11_t*>(table_));
    case 12:
      return f(static_cast<const ncclGin_v12_t*>(table_));
    case 13:
      return f(static_cast<const ncclGin_v13_t*>(table_));
    case 14:
      return f(static_cast<const ncclRma_v14_t*>(table_));
    case 15:
      return f(static_cast<const ncclRma_v15_t*>(table_));
    case 16:
      return f(static_cast<const ncclRma_v16_t*>(table_));
    case 17:
      return f(static_cast<const ncclRma_v17_t*>(table_));
    default:
      return ncclInvalidUsage;  // nothing loaded
  }
}

ncclResult_t RmaClient::init(void** ctx, ncclDebugLogger_t logger) const {
  // NCCL passes its communicator's hash; any fixed value serves here.
  return visit(
      [&](auto* t) { return t->init(ctx, 0x1234, logger != nullptr ? logger : quiet_logger); });
}
ncclResult_t RmaClient::finalize(void* ctx) const {
  return visit([&](auto* t) { return t->finalize(ctx); });
}
ncclResult_t RmaClient::devices(int* ndev) const {
  return visit([&](auto* t) { return t->devices(ndev); });
}

ncclResult_t RmaClient::properties(int dev, int* device_type, int* max_recvs,
                                   int* ptr_support) const {
  return visit([&](auto* t) {
    std::conditional_t < requires {
      t->iget;
    }
    , ncclNetProperties_v12_t, ncclNetProperties_v11_t > props{};
    ncclResult_t result = t->getProperties(dev, &props);
    *device_type = props.netDeviceType;
    *max_recvs = props.maxRecvs;
    *ptr_support = props.ptrSupport;
    return result;
  });
}

ncclResult_t RmaClient::listen(void* ctx, int dev, void* handle, void** listen_comm) const {
  return visit([&](auto* t) { return t->listen(ctx, dev, handle, listen_comm); });
}

ncclResult_t RmaClient::connect(void* ctx, void** handles, int nranks, int rank, void* listen_comm,
                                void** comm) const {
  return visit([&](auto* t) {
    if constexpr (std::is_same_v<std::decay_t<decltype(*t)>, ncclGin_v12_t>) {
      return t->connect(ctx, handles, nranks, rank, 1, 0, listen_comm, comm);
    } else {
      return t->connect(ctx, handles, nranks, rank, listen_comm, comm);
    }
  });
}

ncclResult_t RmaClient::close_listen(void* listen_comm) const {
  return visit([&](auto* t) { return t->closeListen(listen_comm); });
}
ncclResult_t RmaClient::close_coll(void* comm) const {
  return visit([&](auto* t) { return t->closeColl(comm); });
}

ncclResult_t RmaClient::create_context(void* comm, int contexts, int nranks,
                                       RmaTarget* target) const {
  target->comm = comm;
  target->context = nullptr;
  return visit([&](auto* t) -> ncclResult_t {
    using Table = std::decay_t<decltype(*t)>;
    if constexpr (std::is_same_v<Table, ncclGin_v11_t> || std::is_same_v<Table, ncclGin_v12_t>) {
      return ncclSuccess;
    } else if constexpr (std::is_same_v<Table, ncclGin_v13_t>) {
      ncclGinConfig_v13_t config{0, 0, contexts, 0, -1};
      ncclNetDeviceHandle_v11_t* device = nullptr;
      ncclResult_t result = t->createContext(comm, &config, &target->context, &device);
      if (result == ncclSuccess && (device == nullptr || device->netDeviceType != 2)) {
        return ncclInternalError;  // NCCL needs a GIN proxy device handle back
      }
      return result;
    } else if constexpr (std::is_same_v<Table, ncclRma_v17_t>) {
      std::vector<int> peers(static_cast<size_t>(nranks));
      for (int r = 0; r < nranks; ++r) peers[static_cast<size_t>(r)] = r;
      ncclRmaConfig_v17_t config{contexts, INT_MIN, peers.data(), nranks};
      return t->createContext(comm, &config, &target->context);
    } else {
      ncclRmaConfig_v14_t config{contexts, INT_MIN, 1};
      return t->createContext(comm, &config, &target->context);
    }
  });
}

ncclResult_t RmaClient::create_context_with_peers(void* comm, int contexts,
                                                  const std::vector<int>& peers,
                                                  RmaTarget* target) const {
  target->comm = comm;
  target->context = nullptr;
  if (version_ != 17) return ncclInvalidUsage;
  std::vector<int> listed = peers;
  ncclRmaConfig_v17_t config{contexts, INT_MIN, listed.data(), static_cast<int>(listed.size())};
  return static_cast<const ncclRma_v17_t*>(table_)->createContext(comm, &config, &target->context);
}

ncclResult_t RmaClient::rma_properties(void* comm, bool* flushes_all_puts_on_any_signal) const {
  return visit([&](auto* t) -> ncclResult_t {
    if constexpr (requires { t->getRmaProperties; }) {
      ncclRmaProperties_v16_t props{};
      ncclResult_t result = t->getRmaProperties(comm, &props);
      *flushes_all_puts_on_any_signal = props.flushesAllPutsOnAnySignal;
      return result;
    } else {
      return ncclInvalidUsage;
    }
  });
}

ncclResult_t RmaClient::destroy_context(const RmaTarget& target) const {
  if (target.context == nullptr) return ncclSuccess;
  return visit([&](auto* t) -> ncclResult_t {
    if constexpr (requires { t->destroyContext(target.context); }) {
      return t->destroyContext(target.context);
    } else {
      return ncclSuccess;
    }
  });
}

ncclResult_t RmaClient::reg(void* comm, void* data, size_t size, int type, uint64_t flags,
                            void** mhandle) const {
  return visit([&](auto* t) -> ncclResult_t {
    if constexpr (requires { t->regMrSym(comm, data, size, type, flags, mhandle); }) {
      return t->regMrSym(comm, data, size, type, flags, mhandle);
    } else {
      void* gin_handle = nullptr;
      ncclResult_t result = t->regMrSym(comm, data, size, type, flags, mhandle, &gin_handle);
      // NCCL's proxy queues mix the two: they must be one pointer.
      if (result == ncclSuccess && gin_handle != *mhandle) return ncclInternalError;
      return result;
    }
  });
}

ncclResult_t RmaClient::dereg(void* comm, void* mhandle) const {
  return visit([&](auto* t) { return t->deregMrSym(comm, mhandle); });
}

ncclResult_t RmaClient::put(const RmaTarget& target, int context, uint64_t src_off, void* src,
                            size_t size, uint64_t dst_off, void* dst, uint32_t rank,
                            void** request) const {
  return visit([&](auto* t) -> ncclResult_t {
    using Table = std::decay_t<decltype(*t)>;
    if constexpr (std::is_same_v<Table, ncclGin_v11_t>) {
      return t->iput(target.comm, src_off, src, size, dst_off, dst, rank, request);
    } else if constexpr (std::is_same_v<Table, ncclGin_v12_t>) {
      return t->iput(target.comm, src_off, src, size, dst_off, dst, rank, context, request);
    } else if constexpr (std::is_same_v<Table, ncclGin_v13_t> ||
                         std::is_same_v<Table, ncclRma_v14_t>) {
      return t->iput(target.context, context, src_off, src, size, dst_off, dst, rank, request);
    } else {
      return t->iput(target.context, context, src_off, src, size, dst_off, dst, rank, opt_flags_,
                     request);
    }
  });
}

ncclResult_t RmaClient::put_signal(const RmaTarget& target, int context, uint64_t src_off,
                                   void* src, size_t size, uint64_t dst_off, void* dst,
                                   uint32_t rank, uint64_t signal_off, void* signal, uint64_t value,
                                   uint32_t op, bool strong, void** request) const {
  return visit([&](auto* t) -> ncclResult_t {
    using Table = std::decay_t<decltype(*t)>;
    if constexpr (std::is_same_v<Table, ncclGin_v11_t>) {
      return t->iputSignal(target.comm, src_off, src, size, dst_off, dst, rank, signal_off, signal,
                           value, op, request);
    } else if constexpr (std::is_same_v<Table, ncclGin_v12_t>) {
      return t->iputSignal(target.comm, src_off, src, size, dst_off, dst, rank, signal_off, signal,
                           value, op, context, request);
    } else if constexpr (std::is_same_v<Table, ncclGin_v13_t>) {
      return t->iputSignal(target.context, context, src_off, src, size, dst_off, dst, rank,
                           signal_off, signal, value, op, request);
    } else if constexpr (std::is_same_v<Table, ncclRma_v14_t>) {
      return t->iputSignal(target.context, context, src_off, src, size, dst_off, dst, rank,
                           signal_off, signal, value, op, strong, request);
    } else {
      return t->iputSignal(target.context, context, src_off, src, size, dst_off, dst, rank,
                           signal_off, signal, value, op, strong, opt_flags_, request);
    }
  });
}

ncclResult_t RmaClient::get(const RmaTarget& target, int context, uint64_t remote_off, void* remote,
                            size_t size, uint64_t local_off, void* local, uint32_t rank,
                            void** request) const {
  return visit([&](auto* t) -> ncclResult_t {
    using Table = std::decay_t<decltype(*t)>;
    if constexpr (std::is_same_v<Table, ncclGin_v11_t> || std::is_same_v<Table, ncclGin_v12_t>) {
      return ncclInvalidUsage;
    } else if constexpr (std::is_same_v<Table, ncclGin_v13_t> ||
                         std::is_same_v<Table, ncclRma_v14_t>) {
      return t->iget(target.context, context, remote_off, remote, size, local_off, local, rank,
                     request);
    } else {
      return t->iget(target.context, context, remote_off, remote, size, local_off, local, rank,
                     opt_flags_, request);
    }
  });
}

ncclResult_t RmaClient::flush(const RmaTarget& target, int context, void* mhandle, uint32_t rank,
                              void** request) const {
  return visit([&](auto* t) -> ncclResult_t {
    if constexpr (requires { t->iflush; }) {
      return t->iflush(target.context, context, mhandle, rank, request);
    } else {
      return ncclInvalidUsage;
    }
  });
}

ncclResult_t RmaClient::test(void* comm, void* request, int* done) const {
  return visit([&](auto* t) { return t->test(comm, request, done); });
}

ncclResult_t RmaClient::progress(const RmaTarget& target) const {
  return visit([&](auto* t) -> ncclResult_t {
    if constexpr (requires { t->rmaProgress; }) {
      return t->rmaProgress != nullptr ? t->rmaProgress(target.context) : ncclSuccess;
    } else if constexpr (requires { t->iget; }) {  // GIN v13: per block
      return t->ginProgress != nullptr ? t->ginProgress(target.context) : ncclSuccess;
    } else {
      return t->ginProgress != nullptr ? t->ginProgress(target.comm) : ncclSuccess;
    }
  });
}

ncclResult_t RmaClient::query_last_error(const RmaTarget& target, bool* has_error) const {
  *has_error = false;
  if (target.context == nullptr) return ncclSuccess;  // proxy mode: NCCL's own flag
  return visit([&](auto* t) -> ncclResult_t {
    if constexpr (requires { t->iget; }) {
      return t->queryLastError(target.context, has_error);
    } else {
      return ncclSuccess;
    }
  });
}

}  // namespace weft
