#include "abi/one_sided/entry_points.h"

#include <cstring>
#include <memory>
#include <string>

#include "abi/guarded.h"
#include "abi/net/entry_points.h"
#include "abi/plugin_state.h"
#include "nccl/one_sided.h"
#include "weft/log.h"

namespace weft::abi {
namespace {

// What NCCL holds as a context (RMA rmaCtx, GIN ginCtx): the transport's
// block and, for the GIN tables, the device handle that tells NCCL to run
// its own proxy.
struct ContextBlock {
  static constexpr uint32_t kMagic = 0x57435458;  // "WCTX"
  uint32_t magic = kMagic;
  RmaComm* comm = nullptr;
  RmaContext* context = nullptr;
  ncclNetDeviceHandle_v11_t device{};
};

ContextBlock* block_of(void* block, const char* what) {
  auto* found = static_cast<ContextBlock*>(block);
  if (found == nullptr || found->magic != ContextBlock::kMagic) {
    WEFT_WARN("%s: invalid context pointer %p", what, block);
    return nullptr;
  }
  return found;
}

RmaComm* rma_comm(void* comm, const char* what) {
  return comm_as<RmaComm>(comm, CommKind::Rma, what);
}

ncclResult_t put_on(RmaContext& context, int index, const PutArgs& put, const SignalArgs* signal,
                    void** request, const char* what) {
  SignalSpec spec;
  if (signal != nullptr) {
    if (signal->op != NCCL_NET_SIGNAL_OP_INC && signal->op != NCCL_NET_SIGNAL_OP_ADD) {
      WEFT_WARN("%s: signal operation %u is neither INC (1) nor ADD (2)", what, signal->op);
      return ncclInvalidArgument;
    }
    spec.offset = signal->offset;
    spec.region = signal->region;
    spec.value = signal->op == NCCL_NET_SIGNAL_OP_INC ? 1 : signal->value;
    spec.strong = signal->strong;
  }
  Request* made = nullptr;
  ncclResult_t result =
      context.put(index, put.src_offset, put.src_region, put.size, put.dst_offset, put.dst_region,
                  put.rank, signal != nullptr ? &spec : nullptr, &made);
  *request = made;
  return result;
}

// The transport's one-sided interface; null (and said) where it has none.
OneSidedTransport* one_sided_of(Transport& transport, const char* caller) {
  OneSidedTransport* one_sided = transport.one_sided();
  if (one_sided == nullptr)
    WEFT_WARN("%s: the %s transport has no one-sided operations", caller, transport.name());
  return one_sided;
}

}  // namespace

ncclResult_t rma_devices(int* ndev) {
  return guarded("one-sided devices", [&] {
    if (ndev == nullptr) return ncclInvalidArgument;
    *ndev = 0;
    auto transport = transport_or_null("one-sided devices");
    if (!transport) return ncclInvalidUsage;
    int count = transport->device_count();
    OneSidedTransport* one_sided = transport->one_sided();
    std::string why = std::string(transport->name()) + " transport has no one-sided operations yet";
    if (count > 0 && (one_sided == nullptr || !one_sided->rma_supported(0, &why))) {
      WEFT_INFO(NCCL_INIT | NCCL_NET, "no one-sided operations (RMA, GIN proxy): %s", why.c_str());
      return ncclSuccess;
    }
    *ndev = count;
    return ncclSuccess;
  });
}

ncclResult_t rma_listen(int dev, void* handle, void** listen_comm) {
  return guarded("one-sided listen", [&] {
    if (handle == nullptr || listen_comm == nullptr) return ncclInvalidArgument;
    *listen_comm = nullptr;
    auto transport = transport_or_null("one-sided listen");
    if (!transport) return ncclInvalidUsage;
    OneSidedTransport* one_sided = one_sided_of(*transport, "one-sided listen");
    if (one_sided == nullptr) return ncclInvalidUsage;
    RmaListenComm* comm = nullptr;
    ncclResult_t result = one_sided->rma_listen(dev, handle, &comm);
    if (comm != nullptr) comm->nccl_device = dev;
    *listen_comm = static_cast<Comm*>(comm);
    return result;
  });
}

ncclResult_t rma_connect(void* const* handles, int nranks, int rank, void* listen_comm,
                         void** coll_comm) {
  return guarded("one-sided connect", [&] {
    if (coll_comm == nullptr) return ncclInvalidArgument;
    *coll_comm = nullptr;
    auto* listen = comm_as<RmaListenComm>(listen_comm, CommKind::RmaListen, "one-sided connect");
    if (listen == nullptr) return ncclInvalidArgument;
    auto transport = transport_or_null("one-sided connect");
    if (!transport) return ncclInvalidUsage;
    OneSidedTransport* one_sided = one_sided_of(*transport, "one-sided connect");
    if (one_sided == nullptr) return ncclInvalidUsage;
    RmaComm* comm = nullptr;
    ncclResult_t result = one_sided->rma_connect(handles, nranks, rank, listen, &comm);
    if (comm != nullptr) comm->nccl_device = listen->nccl_device;
    *coll_comm = static_cast<Comm*>(comm);
    return result;
  });
}

ncclResult_t rma_close_listen(void* listen_comm) {
  return guarded("one-sided closeListen", [&] {
    auto* listen = comm_as<RmaListenComm>(listen_comm, CommKind::RmaListen, "closeListen");
    if (listen == nullptr) return ncclInvalidArgument;
    listen->close();
    return ncclSuccess;
  });
}

ncclResult_t rma_close_coll(void* coll_comm) {
  return guarded("one-sided closeColl", [&] {
    RmaComm* comm = rma_comm(coll_comm, "closeColl");
    if (comm == nullptr) return ncclInvalidArgument;
    comm->close();
    return ncclSuccess;
  });
}

ncclResult_t rma_create_context(void* coll_comm, const RmaContextConfig& config, void** block,
                                ncclNetDeviceHandle_v11_t** dev_handle) {
  return guarded("createContext", [&] {
    if (block == nullptr) return ncclInvalidArgument;
    *block = nullptr;
    if (dev_handle != nullptr) *dev_handle = nullptr;
    RmaComm* comm = rma_comm(coll_comm, "createContext");
    if (comm == nullptr) return ncclInvalidArgument;
    auto made = std::make_unique<ContextBlock>();
    made->comm = comm;
    ncclResult_t result = comm->create_context(config, &made->context);
    if (result != ncclSuccess) return result;
    // NCCL runs its own proxy over this block's operations, and drives
    // them with ginProgress.
    made->device.netDeviceType = NCCL_NET_DEVICE_GIN_PROXY;
    made->device.netDeviceVersion = 0;
    made->device.handle = made.get();
    made->device.size = 0;
    made->device.needsProxyProgress = 1;
    if (dev_handle != nullptr) *dev_handle = &made->device;
    *block = made.release();
    return ncclSuccess;
  });
}

ncclResult_t rma_destroy_context(void* block) {
  return guarded("destroyContext", [&] {
    ContextBlock* found = block_of(block, "destroyContext");
    if (found == nullptr) return ncclInvalidArgument;
    std::unique_ptr<ContextBlock> owned(found);
    owned->magic = 0;
    return owned->comm->destroy_context(owned->context);
  });
}

ncclResult_t rma_reg_mr_sym(void* coll_comm, void* data, size_t size, int type, uint64_t flags,
                            void** mhandle) {
  return guarded("regMrSym", [&] {
    if (mhandle == nullptr) return ncclInvalidArgument;
    *mhandle = nullptr;
    RmaComm* comm = rma_comm(coll_comm, "regMrSym");
    if (comm == nullptr) return ncclInvalidArgument;
    return comm->reg_mr_sym(data, size, type, flags, mhandle);
  });
}

ncclResult_t rma_reg_mr_sym_dmabuf(void* coll_comm, void* data, size_t size, int type,
                                   uint64_t offset, int fd, uint64_t flags, void** mhandle) {
  return guarded("regMrSymDmaBuf", [&] {
    if (mhandle == nullptr) return ncclInvalidArgument;
    *mhandle = nullptr;
    RmaComm* comm = rma_comm(coll_comm, "regMrSymDmaBuf");
    if (comm == nullptr) return ncclInvalidArgument;
    return comm->reg_mr_sym_dmabuf(data, size, type, offset, fd, flags, mhandle);
  });
}

ncclResult_t rma_dereg_mr_sym(void* coll_comm, void* mhandle) {
  return guarded("deregMrSym", [&] {
    RmaComm* comm = rma_comm(coll_comm, "deregMrSym");
    if (comm == nullptr) return ncclInvalidArgument;
    return comm->dereg_mr_sym(mhandle);
  });
}

ncclResult_t rma_put(void* block, int context, const PutArgs& put, const SignalArgs* signal,
                     void** request) {
  const char* what = signal != nullptr ? "iputSignal" : "iput";
  return guarded(what, [&] {
    if (request == nullptr) return ncclInvalidArgument;
    *request = nullptr;
    ContextBlock* found = block_of(block, what);
    if (found == nullptr) return ncclInvalidArgument;
    return put_on(*found->context, context, put, signal, request, what);
  });
}

ncclResult_t rma_comm_put(void* coll_comm, const PutArgs& put, const SignalArgs* signal,
                          void** request) {
  const char* what = signal != nullptr ? "iputSignal" : "iput";
  return guarded(what, [&] {
    if (request == nullptr) return ncclInvalidArgument;
    *request = nullptr;
    RmaComm* comm = rma_comm(coll_comm, what);
    if (comm == nullptr) return ncclInvalidArgument;
    RmaContext* context = nullptr;
    ncclResult_t result = comm->default_context(&context);
    if (result != ncclSuccess) return result;
    return put_on(*context, 0, put, signal, request, what);
  });
}

ncclResult_t rma_get(void* block, int context, uint64_t remote_offset, void* remote_region,
                     size_t size, uint64_t local_offset, void* local_region, uint32_t rank,
                     void** request) {
  return guarded("iget", [&] {
    if (request == nullptr) return ncclInvalidArgument;
    *request = nullptr;
    ContextBlock* found = block_of(block, "iget");
    if (found == nullptr) return ncclInvalidArgument;
    Request* made = nullptr;
    ncclResult_t result = found->context->get(context, remote_offset, remote_region, size,
                                              local_offset, local_region, rank, &made);
    *request = made;
    return result;
  });
}

ncclResult_t rma_flush(void* block, int context, uint32_t rank, void** request) {
  return guarded("iflush", [&] {
    if (request == nullptr) return ncclInvalidArgument;
    *request = nullptr;
    ContextBlock* found = block_of(block, "iflush");
    if (found == nullptr) return ncclInvalidArgument;
    Request* made = nullptr;
    ncclResult_t result = found->context->flush(context, rank, &made);
    *request = made;
    return result;
  });
}

ncclResult_t rma_test(void* coll_comm, void* request, int* done) {
  return guarded("one-sided test", [&] {
    if (done == nullptr) return ncclInvalidArgument;
    *done = 0;
    if (rma_comm(coll_comm, "one-sided test") == nullptr) return ncclInvalidArgument;
    if (request == nullptr) {
      WEFT_WARN("one-sided test: NULL request");
      return ncclInvalidArgument;
    }
    return static_cast<Request*>(request)->test(done, nullptr);
  });
}

ncclResult_t rma_progress(void* block) {
  return guarded("rmaProgress", [&] {
    ContextBlock* found = block_of(block, "rmaProgress");
    if (found == nullptr) return ncclInvalidArgument;
    return found->context->progress();
  });
}

ncclResult_t rma_comm_progress(void* coll_comm) {
  return guarded("ginProgress", [&] {
    RmaComm* comm = rma_comm(coll_comm, "ginProgress");
    if (comm == nullptr) return ncclInvalidArgument;
    RmaContext* context = nullptr;
    ncclResult_t result = comm->default_context(&context);
    if (result != ncclSuccess) return result;
    return context->progress();
  });
}

ncclResult_t rma_query_last_error(void* block, bool* has_error) {
  return guarded("queryLastError", [&] {
    if (has_error == nullptr) return ncclInvalidArgument;
    *has_error = false;
    ContextBlock* found = block_of(block, "queryLastError");
    if (found == nullptr) return ncclInvalidArgument;
    *has_error = found->context->failed();
    return ncclSuccess;
  });
}

ncclResult_t rma_get_rma_properties(void* coll_comm, bool* flushes_all_puts_on_any_signal) {
  return guarded("getRmaProperties", [&] {
    if (flushes_all_puts_on_any_signal == nullptr) return ncclInvalidArgument;
    if (rma_comm(coll_comm, "getRmaProperties") == nullptr) return ncclInvalidArgument;
    // A signal makes visible the puts of its own channel (context, sender)
    // only: NCCL keeps its per-peer flushes.
    *flushes_all_puts_on_any_signal = false;
    return ncclSuccess;
  });
}

bool rma_opt_flags_valid(uint32_t flags, const char* what) {
  // Aggregation is a hint weft takes as "more may follow" and does not act
  // on (docs/one-sided.md): the operation is posted as it comes.
  if ((flags & ~static_cast<uint32_t>(NCCL_RMA_OPT_FLAGS_AGGREGATE_REQUESTS)) == 0) return true;
  WEFT_WARN("%s: optFlags 0x%x has bits weft does not know (0x1: aggregate requests)", what, flags);
  return false;
}

}  // namespace weft::abi
