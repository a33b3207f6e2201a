#include "abi/net/entry_points.h"

#include <mutex>

#include "abi/guarded.h"
#include "abi/plugin_state.h"
#include "core/net_events.h"
#include "weft/log.h"

namespace weft::abi {
namespace {

DataComm* data_comm(void* comm, const char* what) {
  auto* base = static_cast<Comm*>(comm);
  if (base == nullptr || (base->kind() != CommKind::Send && base->kind() != CommKind::Recv)) {
    WEFT_WARN("%s: invalid comm pointer %p", what, comm);
    return nullptr;
  }
  return static_cast<DataComm*>(base);
}

}  // namespace

ncclResult_t init_process(ncclDebugLogger_t logger, ncclProfilerCallback_t profiler) {
  // Pre-v11 NCCL inits once per process and never finalizes: hold one
  // reference for the life of the process. A failed init may be retried.
  static std::mutex mutex;
  static bool held = false;
  return guarded("init", [&] {
    std::lock_guard<std::mutex> lock(mutex);
    if (held) return ncclSuccess;
    ncclResult_t result = acquire_plugin(logger, profiler);
    held = result == ncclSuccess;
    return result;
  });
}

ncclResult_t init_context(void** ctx, uint64_t comm_id, int traffic_class, ncclDebugLogger_t logger,
                          ncclProfilerCallback_t profiler) {
  return guarded("init", [&] {
    if (ctx == nullptr) return ncclInvalidArgument;
    *ctx = nullptr;
    ncclResult_t result = acquire_plugin(logger, profiler);
    if (result != ncclSuccess) return result;
    auto* context = new PluginContext();
    context->comm_id = comm_id;
    context->config.traffic_class = traffic_class;
    *ctx = context;
    return ncclSuccess;
  });
}

ncclResult_t finalize_context(void* ctx) {
  return guarded("finalize", [&] {
    // NCCL finalizes even after a failed init, with a NULL ctx.
    if (ctx == nullptr) return ncclSuccess;
    delete static_cast<PluginContext*>(ctx);
    release_plugin();
    return ncclSuccess;
  });
}

ncclResult_t set_net_attr(void* ctx, const NetAttrRanges* ranges) {
  return guarded("setNetAttr", [&] {
    if (ctx == nullptr || ranges == nullptr) {
      WEFT_WARN("setNetAttr: %s is NULL", ctx == nullptr ? "the context" : "the attributes");
      return ncclInvalidArgument;
    }
    struct Range {
      const char* name;
      int max, min;
    };
    const Range checked[] = {
        {"send peers", ranges->send_peers_max, ranges->send_peers_min},
        {"send flows per peer", ranges->send_flows_max, ranges->send_flows_min},
        {"receive peers", ranges->recv_peers_max, ranges->recv_peers_min},
        {"receive flows per peer", ranges->recv_flows_max, ranges->recv_flows_min}};
    for (const Range& range : checked) {
      if (range.max < -1 || range.min < -1 || (range.max >= 0 && range.min > range.max)) {
        WEFT_WARN("setNetAttr: %s: min %d, max %d (each -1 or at least 0, min <= max)", range.name,
                  range.min, range.max);
        return ncclInvalidArgument;
      }
    }
    auto* context = static_cast<PluginContext*>(ctx);
    ConnectionHints hints{ranges->send_peers_max, ranges->send_flows_max, ranges->recv_peers_max,
                          ranges->recv_flows_max};
    if (!context->hints_seen) {
      WEFT_INFO(NCCL_NET,
                "communicator %llx expects up to %d send peers x %d flows, %d receive peers x %d "
                "flows (setNetAttr)",
                static_cast<unsigned long long>(context->comm_id), hints.send_peers,
                hints.send_flows, hints.recv_peers, hints.recv_flows);
    }
    context->hints = hints;
    context->hints_seen = true;
    if (context->budget_warned) return ncclSuccess;
    auto transport = transport_or_null("setNetAttr");
    if (!transport) return ncclInvalidUsage;
    std::string problem = transport->connection_budget_problem(hints);
    if (!problem.empty()) {
      WEFT_WARN("communicator %llx: %s", static_cast<unsigned long long>(context->comm_id),
                problem.c_str());
      context->budget_warned = true;
    }
    return ncclSuccess;
  });
}

CommConfig context_config(void* ctx) {
  if (ctx == nullptr) return CommConfig{};
  return static_cast<PluginContext*>(ctx)->config;
}

ncclResult_t devices(int* ndev) {
  return guarded("devices", [&] {
    if (ndev == nullptr) return ncclInvalidArgument;
    auto transport = transport_or_null("devices");
    if (!transport) return ncclInvalidUsage;
    *ndev = transport->device_count();
    return ncclSuccess;
  });
}

ncclResult_t properties(int dev, DeviceProperties* props) {
  return guarded("getProperties", [&] {
    auto transport = transport_or_null("getProperties");
    if (!transport) return ncclInvalidUsage;
    return transport->properties(dev, props);
  });
}

ncclResult_t make_vdevice(int* dev, int ndevs, const int* devs, int max_devs) {
  return guarded("makeVDevice", [&] {
    if (dev == nullptr || devs == nullptr) return ncclInvalidArgument;
    if (ndevs < 1 || ndevs > max_devs) {
      WEFT_WARN("makeVDevice: %d devices to merge, this ABI version allows 1..%d", ndevs, max_devs);
      return ncclInvalidArgument;
    }
    auto transport = transport_or_null("makeVDevice");
    if (!transport) return ncclInvalidUsage;
    return transport->make_virtual_device(std::vector<int>(devs, devs + ndevs), dev);
  });
}

ncclResult_t listen(int dev, void* handle, void** listen_comm) {
  return guarded("listen", [&] {
    if (handle == nullptr || listen_comm == nullptr) return ncclInvalidArgument;
    *listen_comm = nullptr;
    auto transport = transport_or_null("listen");
    if (!transport) return ncclInvalidUsage;
    ListenComm* comm = nullptr;
    ncclResult_t result = transport->listen(dev, handle, &comm);
    if (comm != nullptr) comm->nccl_device = dev;
    *listen_comm = static_cast<Comm*>(comm);
    return result;
  });
}

ncclResult_t connect(const CommConfig& config, int dev, void* handle, void** send_comm) {
  return guarded("connect", [&] {
    if (handle == nullptr || send_comm == nullptr) return ncclInvalidArgument;
    *send_comm = nullptr;
    auto transport = transport_or_null("connect");
    if (!transport) return ncclInvalidUsage;
    SendComm* comm = nullptr;
    ncclResult_t result = transport->connect(dev, config, handle, &comm);
    if (comm != nullptr) comm->nccl_device = dev;
    *send_comm = static_cast<Comm*>(comm);
    return result;
  });
}

ncclResult_t accept(void* listen_comm, void** recv_comm) {
  return guarded("accept", [&] {
    if (recv_comm == nullptr) return ncclInvalidArgument;
    *recv_comm = nullptr;
    auto* listener = comm_as<ListenComm>(listen_comm, CommKind::Listen, "accept");
    if (listener == nullptr) return ncclInvalidArgument;
    RecvComm* comm = nullptr;
    ncclResult_t result = listener->accept(&comm);
    if (comm != nullptr) comm->nccl_device = listener->nccl_device;
    *recv_comm = static_cast<Comm*>(comm);
    return result;
  });
}

ncclResult_t reg_mr(void* comm, void* data, size_t size, int type, void** mhandle) {
  return guarded("regMr", [&] {
    if (mhandle == nullptr) return ncclInvalidArgument;
    *mhandle = nullptr;
    DataComm* target = data_comm(comm, "regMr");
    if (target == nullptr) return ncclInvalidArgument;
    return target->reg_mr(data, size, type, mhandle);
  });
}

ncclResult_t reg_mr_dmabuf(void* comm, void* data, size_t size, int type, uint64_t offset, int fd,
                           void** mhandle) {
  return guarded("regMrDmaBuf", [&] {
    if (mhandle == nullptr) return ncclInvalidArgument;
    *mhandle = nullptr;
    DataComm* target = data_comm(comm, "regMrDmaBuf");
    if (target == nullptr) return ncclInvalidArgument;
    return target->reg_mr_dmabuf(data, size, type, offset, fd, mhandle);
  });
}

ncclResult_t dereg_mr(void* comm, void* mhandle) {
  return guarded("deregMr", [&] {
    DataComm* target = data_comm(comm, "deregMr");
    if (target == nullptr) return ncclInvalidArgument;
    return target->dereg_mr(mhandle);
  });
}

ncclResult_t isend(void* send_comm, void* data, size_t size, int tag, void* mhandle, void** request,
                   void* phandle) {
  return guarded("isend", [&] {
    if (request == nullptr) return ncclInvalidArgument;
    *request = nullptr;
    auto* comm = comm_as<SendComm>(send_comm, CommKind::Send, "isend");
    if (comm == nullptr) return ncclInvalidArgument;
    Request* req = nullptr;
    ncclResult_t result = comm->isend(data, size, tag, mhandle, &req);
    *request = req;
    if (req != nullptr && phandle != nullptr && net_profiler_on())
      start_send_event(*req, *comm, phandle, size);
    return result;
  });
}

ncclResult_t irecv(void* recv_comm, int n, void** data, const size_t* sizes, const int* tags,
                   void** mhandles, void** request, void** phandles) {
  return guarded("irecv", [&] {
    if (request == nullptr) return ncclInvalidArgument;
    // NCCL may have left NCCL_NET_OPTIONAL_RECV_COMPLETION here: always overwrite.
    *request = nullptr;
    auto* comm = comm_as<RecvComm>(recv_comm, CommKind::Recv, "irecv");
    if (comm == nullptr) return ncclInvalidArgument;
    Request* req = nullptr;
    ncclResult_t result = comm->irecv(n, data, sizes, tags, mhandles, &req);
    *request = req;
    if (req != nullptr && phandles != nullptr && net_profiler_on())
      start_recv_events(*req, *comm, n, phandles, sizes);
    return result;
  });
}

ncclResult_t iflush(void* recv_comm, int n, void** data, const int* sizes, void** mhandles,
                    void** request) {
  return guarded("iflush", [&] {
    if (request == nullptr) return ncclInvalidArgument;
    *request = nullptr;
    auto* comm = comm_as<RecvComm>(recv_comm, CommKind::Recv, "iflush");
    if (comm == nullptr) return ncclInvalidArgument;
    Request* req = nullptr;
    ncclResult_t result = comm->iflush(n, data, sizes, mhandles, &req);
    *request = req;
    return result;
  });
}

ncclResult_t test(void* request, int* done, int* sizes) {
  return guarded("test", [&] {
    if (request == nullptr || done == nullptr) return ncclInvalidArgument;
    auto* req = static_cast<Request*>(request);
    ncclResult_t result = req->test(done, sizes);
    // Done, the request is the comm's again; failed, NCCL stops asking.
    if (*done != 0 || result != ncclSuccess) stop_net_events(*req);
    return result;
  });
}

namespace {

// NCCL closes comms it got from us; NULL is a no-op.
ncclResult_t close_comm(void* comm, CommKind kind, const char* what) {
  return guarded(what, [&] {
    if (comm == nullptr) return ncclSuccess;
    auto* target = comm_as<Comm>(comm, kind, what);
    if (target == nullptr) return ncclInvalidArgument;
    target->close();
    return ncclSuccess;
  });
}

}  // namespace

ncclResult_t close_send(void* send_comm) {
  return close_comm(send_comm, CommKind::Send, "closeSend");
}

ncclResult_t close_recv(void* recv_comm) {
  return close_comm(recv_comm, CommKind::Recv, "closeRecv");
}

ncclResult_t close_listen(void* listen_comm) {
  return close_comm(listen_comm, CommKind::Listen, "closeListen");
}

}  // namespace weft::abi
