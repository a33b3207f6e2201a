// The exported one-sided tables: ncclRmaPlugin_v15..v17 (NCCL after
// 2.30.7: optFlags, getRmaProperties, listed peers), ncclRmaPlugin_v14
// (2.30.7), the v13 layout as ncclRmaPlugin_v13 and ncclGinPlugin_v13
// (2.30.3-2.30.4, and 2.30.7's fallback), ncclGinPlugin_v12 (2.29.7) and
// ncclGinPlugin_v11 (2.28.7-2.29.3). weft is a GIN proxy backend in every one of them: NCCL
// runs its own GPU-to-host queues and calls these host operations.
// Device-direct GIN (ncclGinPlugin_v14) needs NCCL's own device code for
// the NIC and is not offered (docs/one-sided.md). One template builds
// every table, as make_net does the net tables.
#include <climits>

#include "abi/net/entry_points.h"
#include "abi/net/version_adapters.h"
#include "abi/one_sided/entry_points.h"
#include "nccl/one_sided.h"

namespace weft::abi {
namespace {

constexpr int kUndefinedTrafficClass = -1;

int traffic_class_of(int value) {
  // NCCL passes INT_MIN (its config's "undefined") as well as -1.
  return value < 0 ? kUndefinedTrafficClass : value;
}

// V: 11, 12, 13 (GIN and RMA v13 share a layout), or 14..17 (RMA).
template <int V, typename Table, typename Props>
constexpr Table make_one_sided() {
  Table table{};
  table.name = "weft";
  table.init = [](void** ctx, uint64_t comm_id, ncclDebugLogger_t logger) {
    return init_context(ctx, comm_id, kUndefinedTrafficClass, logger);
  };
  table.finalize = finalize_context;
  table.devices = rma_devices;
  // NCCL casts the device type into the comm's GIN type: a proxy, driven
  // from the host.
  table.getProperties = get_properties<Props, NCCL_NET_DEVICE_GIN_PROXY>;
  table.listen = [](void*, int dev, void* handle, void** listen_comm) {
    return rma_listen(dev, handle, listen_comm);
  };
  // 2.30.7's host RMA path passes the net plugin's context here: weft
  // takes nothing from it.
  if constexpr (V == 12) {
    table.connect = [](void*, void* handles[], int nranks, int rank, int, int, void* listen_comm,
                       void** coll_comm) {
      return rma_connect(handles, nranks, rank, listen_comm, coll_comm);
    };
  } else {
    table.connect = [](void*, void* handles[], int nranks, int rank, void* listen_comm,
                       void** coll_comm) {
      return rma_connect(handles, nranks, rank, listen_comm, coll_comm);
    };
  }
  table.closeListen = rma_close_listen;
  table.closeColl = rma_close_coll;
  table.destroyContext = rma_destroy_context;
  table.deregMrSym = rma_dereg_mr_sym;
  table.test = rma_test;

  if constexpr (V == 11) {
    table.createContext = [](void* coll_comm, int, int, void** ctx,
                             ncclNetDeviceHandle_v11_t** dev_handle) {
      return rma_create_context(coll_comm, RmaContextConfig{}, ctx, dev_handle);
    };
  } else if constexpr (V == 12) {
    table.createContext = [](void* coll_comm, int, int, int contexts, void** ctx,
                             ncclNetDeviceHandle_v11_t** dev_handle) {
      RmaContextConfig config;
      config.contexts = contexts;
      return rma_create_context(coll_comm, config, ctx, dev_handle);
    };
  } else if constexpr (V == 13) {
    table.createContext = [](void* coll_comm, ncclGinConfig_v13_t* in, void** ctx,
                             ncclNetDeviceHandle_v11_t** dev_handle) {
      if (in == nullptr) return ncclInvalidArgument;
      RmaContextConfig config;
      config.contexts = in->nContexts;
      config.traffic_class = traffic_class_of(in->trafficClass);
      return rma_create_context(coll_comm, config, ctx, dev_handle);
    };
  } else if constexpr (V <= 16) {
    table.createContext = [](void* coll_comm, ncclRmaConfig_v14_t* in, void** ctx) {
      if (in == nullptr) return ncclInvalidArgument;
      RmaContextConfig config;
      config.contexts = in->nContexts;
      config.traffic_class = traffic_class_of(in->trafficClass);
      config.rank_stride = in->rankStride;
      return rma_create_context(coll_comm, config, ctx, nullptr);
    };
  } else {
    table.createContext = [](void* coll_comm, ncclRmaConfig_v17_t* in, void** ctx) {
      if (in == nullptr || in->peerArrayCount < 0 ||
          (in->peerArrayCount > 0 && in->peerArray == nullptr)) {
        return ncclInvalidArgument;
      }
      RmaContextConfig config;
      config.contexts = in->nContexts;
      config.traffic_class = traffic_class_of(in->trafficClass);
      config.listed_peers = true;
      config.peers.assign(in->peerArray, in->peerArray + in->peerArrayCount);
      return rma_create_context(coll_comm, config, ctx, nullptr);
    };
  }
  if constexpr (V >= 16) {
    table.getRmaProperties = [](void* coll_comm, ncclRmaProperties_v16_t* props) {
      if (props == nullptr) return ncclInvalidArgument;
      return rma_get_rma_properties(coll_comm, &props->flushesAllPutsOnAnySignal);
    };
  }

  if constexpr (V <= 13) {
    // NCCL's proxy queues carry ginHandle (v11) or mhandle: the same pointer.
    table.regMrSym = [](void* coll_comm, void* data, size_t size, int type, uint64_t flags,
                        void** mhandle, void** gin_handle) {
      ncclResult_t result = rma_reg_mr_sym(coll_comm, data, size, type, flags, mhandle);
      if (gin_handle != nullptr) *gin_handle = mhandle != nullptr ? *mhandle : nullptr;
      return result;
    };
    table.regMrSymDmaBuf = [](void* coll_comm, void* data, size_t size, int type, uint64_t offset,
                              int fd, uint64_t flags, void** mhandle, void** gin_handle) {
      ncclResult_t result =
          rma_reg_mr_sym_dmabuf(coll_comm, data, size, type, offset, fd, flags, mhandle);
      if (gin_handle != nullptr) *gin_handle = mhandle != nullptr ? *mhandle : nullptr;
      return result;
    };
  } else {
    table.regMrSym = rma_reg_mr_sym;
    table.regMrSymDmaBuf = rma_reg_mr_sym_dmabuf;
  }

  if constexpr (V <= 12) {
    // Operations on the comm itself: its default block, context 0.
    if constexpr (V == 11) {
      table.iput = [](void* coll_comm, uint64_t src_off, void* src, size_t size, uint64_t dst_off,
                      void* dst, uint32_t rank, void** request) {
        return rma_comm_put(coll_comm, PutArgs{src_off, src, size, dst_off, dst, rank}, nullptr,
                            request);
      };
      table.iputSignal = [](void* coll_comm, uint64_t src_off, void* src, size_t size,
                            uint64_t dst_off, void* dst, uint32_t rank, uint64_t signal_off,
                            void* signal_region, uint64_t value, uint32_t op, void** request) {
        SignalArgs signal{signal_off, signal_region, value, op, true};
        return rma_comm_put(coll_comm, PutArgs{src_off, src, size, dst_off, dst, rank}, &signal,
                            request);
      };
    } else {
      // A connection id only spreads NCCL's own queues: one order serves all.
      table.iput = [](void* coll_comm, uint64_t src_off, void* src, size_t size, uint64_t dst_off,
                      void* dst, uint32_t rank, int, void** request) {
        return rma_comm_put(coll_comm, PutArgs{src_off, src, size, dst_off, dst, rank}, nullptr,
                            request);
      };
      table.iputSignal = [](void* coll_comm, uint64_t src_off, void* src, size_t size,
                            uint64_t dst_off, void* dst, uint32_t rank, uint64_t signal_off,
                            void* signal_region, uint64_t value, uint32_t op, int, void** request) {
        SignalArgs signal{signal_off, signal_region, value, op, true};
        return rma_comm_put(coll_comm, PutArgs{src_off, src, size, dst_off, dst, rank}, &signal,
                            request);
      };
    }
    table.ginProgress = rma_comm_progress;
    // Proxy mode reads NCCL's own error flag; a block made here reports its own.
    table.queryLastError = rma_query_last_error;
  } else if constexpr (V >= 15) {
    table.iput = [](void* ctx, int context, uint64_t src_off, void* src, size_t size,
                    uint64_t dst_off, void* dst, uint32_t rank, uint32_t opt_flags,
                    void** request) {
      if (!rma_opt_flags_valid(opt_flags, "iput")) return ncclInvalidArgument;
      return rma_put(ctx, context, PutArgs{src_off, src, size, dst_off, dst, rank}, nullptr,
                     request);
    };
    table.iputSignal = [](void* ctx, int context, uint64_t src_off, void* src, size_t size,
                          uint64_t dst_off, void* dst, uint32_t rank, uint64_t signal_off,
                          void* signal_region, uint64_t value, uint32_t op, bool strong,
                          uint32_t opt_flags, void** request) {
      if (!rma_opt_flags_valid(opt_flags, "iputSignal")) return ncclInvalidArgument;
      SignalArgs signal{signal_off, signal_region, value, op, strong};
      return rma_put(ctx, context, PutArgs{src_off, src, size, dst_off, dst, rank}, &signal,
                     request);
    };
    table.iget = [](void* ctx, int context, uint64_t remote_off, void* remote, size_t size,
                    uint64_t local_off, void* local, uint32_t rank, uint32_t opt_flags,
                    void** request) {
      if (!rma_opt_flags_valid(opt_flags, "iget")) return ncclInvalidArgument;
      return rma_get(ctx, context, remote_off, remote, size, local_off, local, rank, request);
    };
    table.rmaProgress = rma_progress;
    table.iflush = [](void* ctx, int context, void*, uint32_t rank, void** request) {
      return rma_flush(ctx, context, rank, request);
    };
    table.queryLastError = rma_query_last_error;
  } else {
    table.iput = [](void* ctx, int context, uint64_t src_off, void* src, size_t size,
                    uint64_t dst_off, void* dst, uint32_t rank, void** request) {
      return rma_put(ctx, context, PutArgs{src_off, src, size, dst_off, dst, rank}, nullptr,
                     request);
    };
    if constexpr (V == 13) {
      table.iputSignal = [](void* ctx, int context, uint64_t src_off, void* src, size_t size,
                            uint64_t dst_off, void* dst, uint32_t rank, uint64_t signal_off,
                            void* signal_region, uint64_t value, uint32_t op, void** request) {
        SignalArgs signal{signal_off, signal_region, value, op, true};
        return rma_put(ctx, context, PutArgs{src_off, src, size, dst_off, dst, rank}, &signal,
                       request);
      };
      table.ginProgress = rma_progress;
    } else {
      table.iputSignal = [](void* ctx, int context, uint64_t src_off, void* src, size_t size,
                            uint64_t dst_off, void* dst, uint32_t rank, uint64_t signal_off,
                            void* signal_region, uint64_t value, uint32_t op, bool strong,
                            void** request) {
        SignalArgs signal{signal_off, signal_region, value, op, strong};
        return rma_put(ctx, context, PutArgs{src_off, src, size, dst_off, dst, rank}, &signal,
                       request);
      };
      table.rmaProgress = rma_progress;
    }
    table.iget = rma_get;
    table.iflush = [](void* ctx, int context, void*, uint32_t rank, void** request) {
      return rma_flush(ctx, context, rank, request);
    };
    table.queryLastError = rma_query_last_error;
  }
  return table;
}

}  // namespace
}  // namespace weft::abi

using weft::abi::make_one_sided;

extern "C" {
__attribute__((visibility("default"))) extern const ncclGin_v11_t ncclGinPlugin_v11 =
    make_one_sided<11, ncclGin_v11_t, ncclNetProperties_v11_t>();
__attribute__((visibility("default"))) extern const ncclGin_v12_t ncclGinPlugin_v12 =
    make_one_sided<12, ncclGin_v12_t, ncclNetProperties_v11_t>();
__attribute__((visibility("default"))) extern const ncclGin_v13_t ncclGinPlugin_v13 =
    make_one_sided<13, ncclGin_v13_t, ncclNetProperties_v12_t>();
__attribute__((visibility("default"))) extern const ncclRma_v13_t ncclRmaPlugin_v13 =
    make_one_sided<13, ncclRma_v13_t, ncclNetProperties_v12_t>();
__attribute__((visibility("default"))) extern const ncclRma_v14_t ncclRmaPlugin_v14 =
    make_one_sided<14, ncclRma_v14_t, ncclNetProperties_v12_t>();
__attribute__((visibility("default"))) extern const ncclRma_v15_t ncclRmaPlugin_v15 =
    make_one_sided<15, ncclRma_v15_t, ncclNetProperties_v12_t>();
__attribute__((visibility("default"))) extern const ncclRma_v16_t ncclRmaPlugin_v16 =
    make_one_sided<16, ncclRma_v16_t, ncclNetProperties_v12_t>();
__attribute__((visibility("default"))) extern const ncclRma_v17_t ncclRmaPlugin_v17 =
    make_one_sided<17, ncclRma_v17_t, ncclNetProperties_v12_t>();
}
