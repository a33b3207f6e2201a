// The exported ncclNetPlugin_v6..v12 tables: the only symbols of the .so.
// One template builds every version; `if constexpr` on the version number
// picks each member's calling convention.
#include <climits>

#include "abi/net/version_adapters.h"
#include "nccl/net.h"

namespace weft::abi {
namespace {

template <int V, typename Net, typename Props, typename DevHandle>
constexpr Net make_net() {
  Net net{};
  net.name = "weft";

  if constexpr (V >= 11) {
    net.init = [](void** ctx, uint64_t comm_id, ncclNetCommConfig_v11_t* config,
                  ncclDebugLogger_t logger, ncclProfilerCallback_t profiler) {
      return init_context(ctx, comm_id, config == nullptr ? -1 : config->trafficClass, logger,
                          profiler);
    };
    net.finalize = finalize_context;
    net.setNetAttr = [](void* ctx, auto* attr) {
      if (attr == nullptr) return set_net_attr(ctx, nullptr);
      NetAttrRanges ranges;
      ranges.send_peers_max = attr->sendCommAttr.maxConcurrentPeers;
      ranges.send_peers_min = attr->sendCommAttr.minConcurrentPeers;
      ranges.send_flows_max = attr->sendCommAttr.maxFlowsPerPeer;
      ranges.send_flows_min = attr->sendCommAttr.minFlowsPerPeer;
      ranges.recv_peers_max = attr->recvCommAttr.maxConcurrentPeers;
      ranges.recv_peers_min = attr->recvCommAttr.minConcurrentPeers;
      ranges.recv_flows_max = attr->recvCommAttr.maxFlowsPerPeer;
      ranges.recv_flows_min = attr->recvCommAttr.minFlowsPerPeer;
      return set_net_attr(ctx, &ranges);
    };
  } else if constexpr (V == 10) {
    net.init = [](ncclDebugLogger_t logger, ncclProfilerCallback_t profiler) {
      return init_process(logger, profiler);
    };
  } else {
    net.init = [](ncclDebugLogger_t logger) { return init_process(logger); };
  }

  net.devices = devices;
  net.getProperties = get_properties<Props>;

  if constexpr (V >= 11) {
    net.listen = [](void*, int dev, void* handle, void** listen_comm) {
      return listen(dev, handle, listen_comm);
    };
    net.connect = [](void* ctx, int dev, void* handle, void** send_comm, DevHandle** dev_comm) {
      clear_device_handle(dev_comm);
      return connect(context_config(ctx), dev, handle, send_comm);
    };
  } else {
    net.listen = listen;
    if constexpr (V == 10) {
      net.connect = [](int dev, ncclNetCommConfig_v10_t* config, void* handle, void** send_comm,
                       DevHandle** dev_comm) {
        clear_device_handle(dev_comm);
        CommConfig internal;
        if (config != nullptr) internal.traffic_class = config->trafficClass;
        return connect(internal, dev, handle, send_comm);
      };
    } else if constexpr (V >= 7) {
      net.connect = [](int dev, void* handle, void** send_comm, DevHandle** dev_comm) {
        clear_device_handle(dev_comm);
        return connect(CommConfig{}, dev, handle, send_comm);
      };
    } else {
      net.connect = [](int dev, void* handle, void** send_comm) {
        return connect(CommConfig{}, dev, handle, send_comm);
      };
    }
  }

  if constexpr (V >= 7) {
    net.accept = [](void* listen_comm, void** recv_comm, DevHandle** dev_comm) {
      clear_device_handle(dev_comm);
      return accept(listen_comm, recv_comm);
    };
    net.getDeviceMr = nullptr;  // HOST plugin: NCCL expects NULL
    net.irecvConsumed = nullptr;
  } else {
    net.accept = accept;
  }

  if constexpr (V >= 8) {
    net.regMr = reg_mr;
  } else {
    net.regMr = [](void* comm, void* data, int size, int type, void** mhandle) {
      if (size < 0) return ncclInvalidArgument;
      return reg_mr(comm, data, static_cast<size_t>(size), type, mhandle);
    };
  }
  net.regMrDmaBuf = reg_mr_dmabuf;
  net.deregMr = dereg_mr;

  if constexpr (V >= 10) {
    net.isend = [](void* comm, void* data, size_t size, int tag, void* mhandle, void* phandle,
                   void** request) {
      return isend(comm, data, size, tag, mhandle, request, phandle);
    };
    net.irecv = [](void* comm, int n, void** data, size_t* sizes, int* tags, void** mhandles,
                   void** phandles, void** request) {
      return irecv(comm, n, data, sizes, tags, mhandles, request, phandles);
    };
  } else if constexpr (V == 9) {
    net.isend = [](void* comm, void* data, size_t size, int tag, void* mhandle, void** request) {
      return isend(comm, data, size, tag, mhandle, request);
    };
    net.irecv = [](void* comm, int n, void** data, size_t* sizes, int* tags, void** mhandles,
                   void** request) { return irecv(comm, n, data, sizes, tags, mhandles, request); };
  } else {
    net.isend = isend_int_size;
    net.irecv = irecv_int_sizes;
  }
  net.iflush = [](void* comm, int n, void** data, int* sizes, void** mhandles, void** request) {
    return iflush(comm, n, data, sizes, mhandles, request);
  };
  net.test = test;
  net.closeSend = close_send;
  net.closeRecv = close_recv;
  net.closeListen = close_listen;
  if constexpr (V >= 9) {
    net.makeVDevice = [](int* dev, auto* props) {
      if (props == nullptr) return ncclInvalidArgument;
      constexpr int kMaxDevs = static_cast<int>(sizeof(props->devs) / sizeof(props->devs[0]));
      return make_vdevice(dev, props->ndevs, props->devs, kMaxDevs);
    };
  }
  return net;
}

}  // namespace
}  // namespace weft::abi

using weft::abi::make_net;

extern "C" {
__attribute__((visibility("default"))) extern const ncclNet_v6_t ncclNetPlugin_v6 =
    make_net<6, ncclNet_v6_t, ncclNetProperties_v6_t, void>();
__attribute__((visibility("default"))) extern const ncclNet_v7_t ncclNetPlugin_v7 =
    make_net<7, ncclNet_v7_t, ncclNetProperties_v7_t, ncclNetDeviceHandle_v7_t>();
__attribute__((visibility("default"))) extern const ncclNet_v8_t ncclNetPlugin_v8 =
    make_net<8, ncclNet_v8_t, ncclNetProperties_v8_t, ncclNetDeviceHandle_v8_t>();
__attribute__((visibility("default"))) extern const ncclNet_v9_t ncclNetPlugin_v9 =
    make_net<9, ncclNet_v9_t, ncclNetProperties_v9_t, ncclNetDeviceHandle_v9_t>();
__attribute__((visibility("default"))) extern const ncclNet_v10_t ncclNetPlugin_v10 =
    make_net<10, ncclNet_v10_t, ncclNetProperties_v10_t, ncclNetDeviceHandle_v10_t>();
__attribute__((visibility("default"))) extern const ncclNet_v11_t ncclNetPlugin_v11 =
    make_net<11, ncclNet_v11_t, ncclNetProperties_v11_t, ncclNetDeviceHandle_v11_t>();
__attribute__((visibility("default"))) extern const ncclNet_v12_t ncclNetPlugin_v12 =
    make_net<12, ncclNet_v12_t, ncclNetProperties_v12_t, ncclNetDeviceHandle_v12_t>();
}
