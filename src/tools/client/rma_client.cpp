#include "weft/rma_client.h"

#include <dlfcn.h>

#include <climits>

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
  static constexpr Choice kChoices[] = {{"rma14", "ncclRmaPlugin_v14", 14},
                                        {"rma13", "ncclRmaPlugin_v13", 13},
                                        {"gin13", "ncclGinPlugin_v13", 13},
                                        {"gin12", "ncclGinPlugin_v12", 12},
                                        {"gin11", "ncclGinPlugin_v11", 11}};
  const Choice* choice = nullptr;
  for (const Choice& c : kChoices)
    if (which == c.name) choice = &c;
  if (choice == nullptr) {
    *error = "unknown table '" + which + "' (rma14, rma13, gin13, gin12, gin11)";
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
  switch (version_) {
    case 11:
      v11_ = static_cast<const ncclGin_v11_t*>(table);
      break;
    case 12:
      v12_ = static_cast<const ncclGin_v12_t*>(table);
      break;
    case 13:
      v13_ = static_cast<const ncclGin_v13_t*>(table);
      break;
    default:
      v14_ = static_cast<const ncclRma_v14_t*>(table);
      break;
  }
  return true;
}

// Calls the member of whichever table is loaded.
#define WEFT_RMA_CALL(member, ...)               \
  (v14_ != nullptr   ? v14_->member(__VA_ARGS__) \
   : v13_ != nullptr ? v13_->member(__VA_ARGS__) \
   : v12_ != nullptr ? v12_->member(__VA_ARGS__) \
                     : v11_->member(__VA_ARGS__))

ncclResult_t RmaClient::init(void** ctx, ncclDebugLogger_t logger) const {
  // NCCL passes its communicator's hash; any fixed value serves here.
  return WEFT_RMA_CALL(init, ctx, 0x1234, logger != nullptr ? logger : quiet_logger);
}
ncclResult_t RmaClient::finalize(void* ctx) const {
  return WEFT_RMA_CALL(finalize, ctx);
}
ncclResult_t RmaClient::devices(int* ndev) const {
  return WEFT_RMA_CALL(devices, ndev);
}

ncclResult_t RmaClient::properties(int dev, int* device_type, int* max_recvs,
                                   int* ptr_support) const {
  ncclResult_t result;
  if (version_ <= 12) {
    ncclNetProperties_v11_t props{};
    result = v12_ != nullptr ? v12_->getProperties(dev, &props) : v11_->getProperties(dev, &props);
    *device_type = props.netDeviceType;
    *max_recvs = props.maxRecvs;
    *ptr_support = props.ptrSupport;
  } else {
    ncclNetProperties_v12_t props{};
    result = v14_ != nullptr ? v14_->getProperties(dev, &props) : v13_->getProperties(dev, &props);
    *device_type = props.netDeviceType;
    *max_recvs = props.maxRecvs;
    *ptr_support = props.ptrSupport;
  }
  return result;
}

ncclResult_t RmaClient::listen(void* ctx, int dev, void* handle, void** listen_comm) const {
  return WEFT_RMA_CALL(listen, ctx, dev, handle, listen_comm);
}

ncclResult_t RmaClient::connect(void* ctx, void** handles, int nranks, int rank, void* listen_comm,
                                void** comm) const {
  if (v12_ != nullptr) return v12_->connect(ctx, handles, nranks, rank, 1, 0, listen_comm, comm);
  if (v14_ != nullptr) return v14_->connect(ctx, handles, nranks, rank, listen_comm, comm);
  if (v13_ != nullptr) return v13_->connect(ctx, handles, nranks, rank, listen_comm, comm);
  return v11_->connect(ctx, handles, nranks, rank, listen_comm, comm);
}

ncclResult_t RmaClient::close_listen(void* listen_comm) const {
  return WEFT_RMA_CALL(closeListen, listen_comm);
}
ncclResult_t RmaClient::close_coll(void* comm) const {
  return WEFT_RMA_CALL(closeColl, comm);
}

ncclResult_t RmaClient::create_context(void* comm, int contexts, int rank_stride,
                                       RmaTarget* target) const {
  target->comm = comm;
  target->context = nullptr;
  if (v14_ != nullptr) {
    ncclRmaConfig_v14_t config{contexts, INT_MIN, rank_stride};
    return v14_->createContext(comm, &config, &target->context);
  }
  if (v13_ != nullptr) {
    ncclGinConfig_v13_t config{0, 0, contexts, 0, -1};
    ncclNetDeviceHandle_v11_t* device = nullptr;
    ncclResult_t result = v13_->createContext(comm, &config, &target->context, &device);
    if (result == ncclSuccess && (device == nullptr || device->netDeviceType != 2)) {
      return ncclInternalError;  // NCCL needs a GIN proxy device handle back
    }
    return result;
  }
  return ncclSuccess;
}

ncclResult_t RmaClient::destroy_context(const RmaTarget& target) const {
  if (target.context == nullptr) return ncclSuccess;
  return v14_ != nullptr ? v14_->destroyContext(target.context)
                         : v13_->destroyContext(target.context);
}

ncclResult_t RmaClient::reg(void* comm, void* data, size_t size, int type, uint64_t flags,
                            void** mhandle) const {
  if (v14_ != nullptr) return v14_->regMrSym(comm, data, size, type, flags, mhandle);
  void* gin_handle = nullptr;
  ncclResult_t result =
      v13_ != nullptr   ? v13_->regMrSym(comm, data, size, type, flags, mhandle, &gin_handle)
      : v12_ != nullptr ? v12_->regMrSym(comm, data, size, type, flags, mhandle, &gin_handle)
                        : v11_->regMrSym(comm, data, size, type, flags, mhandle, &gin_handle);
  // NCCL's proxy queues mix the two: they must be one pointer.
  if (result == ncclSuccess && gin_handle != *mhandle) return ncclInternalError;
  return result;
}

ncclResult_t RmaClient::dereg(void* comm, void* mhandle) const {
  return WEFT_RMA_CALL(deregMrSym, comm, mhandle);
}

ncclResult_t RmaClient::put(const RmaTarget& target, int context, uint64_t src_off, void* src,
                            size_t size, uint64_t dst_off, void* dst, uint32_t rank,
                            void** request) const {
  if (v14_ != nullptr) {
    return v14_->iput(target.context, context, src_off, src, size, dst_off, dst, rank, request);
  }
  if (v13_ != nullptr) {
    return v13_->iput(target.context, context, src_off, src, size, dst_off, dst, rank, request);
  }
  if (v12_ != nullptr) {
    return v12_->iput(target.comm, src_off, src, size, dst_off, dst, rank, context, request);
  }
  return v11_->iput(target.comm, src_off, src, size, dst_off, dst, rank, request);
}

ncclResult_t RmaClient::put_signal(const RmaTarget& target, int context, uint64_t src_off,
                                   void* src, size_t size, uint64_t dst_off, void* dst,
                                   uint32_t rank, uint64_t signal_off, void* signal, uint64_t value,
                                   uint32_t op, bool strong, void** request) const {
  if (v14_ != nullptr) {
    return v14_->iputSignal(target.context, context, src_off, src, size, dst_off, dst, rank,
                            signal_off, signal, value, op, strong, request);
  }
  if (v13_ != nullptr) {
    return v13_->iputSignal(target.context, context, src_off, src, size, dst_off, dst, rank,
                            signal_off, signal, value, op, request);
  }
  if (v12_ != nullptr) {
    return v12_->iputSignal(target.comm, src_off, src, size, dst_off, dst, rank, signal_off, signal,
                            value, op, context, request);
  }
  return v11_->iputSignal(target.comm, src_off, src, size, dst_off, dst, rank, signal_off, signal,
                          value, op, request);
}

ncclResult_t RmaClient::get(const RmaTarget& target, int context, uint64_t remote_off, void* remote,
                            size_t size, uint64_t local_off, void* local, uint32_t rank,
                            void** request) const {
  if (v14_ != nullptr) {
    return v14_->iget(target.context, context, remote_off, remote, size, local_off, local, rank,
                      request);
  }
  if (v13_ != nullptr) {
    return v13_->iget(target.context, context, remote_off, remote, size, local_off, local, rank,
                      request);
  }
  return ncclInvalidUsage;
}

ncclResult_t RmaClient::flush(const RmaTarget& target, int context, void* mhandle, uint32_t rank,
                              void** request) const {
  if (v14_ != nullptr) return v14_->iflush(target.context, context, mhandle, rank, request);
  if (v13_ != nullptr) return v13_->iflush(target.context, context, mhandle, rank, request);
  return ncclInvalidUsage;
}

ncclResult_t RmaClient::test(void* comm, void* request, int* done) const {
  return WEFT_RMA_CALL(test, comm, request, done);
}

ncclResult_t RmaClient::progress(const RmaTarget& target) const {
  if (v14_ != nullptr) {
    return v14_->rmaProgress != nullptr ? v14_->rmaProgress(target.context) : ncclSuccess;
  }
  if (v13_ != nullptr) {
    return v13_->ginProgress != nullptr ? v13_->ginProgress(target.context) : ncclSuccess;
  }
  if (v12_ != nullptr) {
    return v12_->ginProgress != nullptr ? v12_->ginProgress(target.comm) : ncclSuccess;
  }
  return v11_->ginProgress != nullptr ? v11_->ginProgress(target.comm) : ncclSuccess;
}

ncclResult_t RmaClient::query_last_error(const RmaTarget& target, bool* has_error) const {
  *has_error = false;
  if (target.context == nullptr) return ncclSuccess;  // proxy mode: NCCL's own flag
  if (v14_ != nullptr) return v14_->queryLastError(target.context, has_error);
  return v13_->queryLastError(target.context, has_error);
}

#undef WEFT_RMA_CALL

}  // namespace weft
