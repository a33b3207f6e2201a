// Version-independent entry points. Each catches every exception and turns
// it into an ncclResult_t: nothing throws across the C ABI.
#pragma once

#include <cstddef>
#include <cstdint>

#include "weft/transport.h"

namespace weft::abi {

// `profiler`: v10+ init's callback (network events, core/net_events.h).
ncclResult_t init_process(ncclDebugLogger_t logger, ncclProfilerCallback_t profiler = nullptr);
ncclResult_t init_context(void** ctx, uint64_t comm_id, int traffic_class, ncclDebugLogger_t logger,
                          ncclProfilerCallback_t profiler = nullptr);
ncclResult_t finalize_context(void* ctx);
// setNetAttr (v11+), its fields in weft's terms: per direction the
// min/max concurrent peers and flows per peer (-1: undefined).
struct NetAttrRanges {
  int send_peers_max = -1, send_peers_min = -1, send_flows_max = -1, send_flows_min = -1;
  int recv_peers_max = -1, recv_peers_min = -1, recv_flows_max = -1, recv_flows_min = -1;
};
ncclResult_t set_net_attr(void* ctx, const NetAttrRanges* ranges);
ncclResult_t devices(int* ndev);
ncclResult_t properties(int dev, DeviceProperties* props);
// makeVDevice: devs[0..ndevs) merged into a new device, its index in *dev.
ncclResult_t make_vdevice(int* dev, int ndevs, const int* devs, int max_devs);
ncclResult_t listen(int dev, void* handle, void** listen_comm);
ncclResult_t connect(const CommConfig& config, int dev, void* handle, void** send_comm);
ncclResult_t accept(void* listen_comm, void** recv_comm);
ncclResult_t reg_mr(void* comm, void* data, size_t size, int type, void** mhandle);
ncclResult_t reg_mr_dmabuf(void* comm, void* data, size_t size, int type, uint64_t offset, int fd,
                           void** mhandle);
ncclResult_t dereg_mr(void* comm, void* mhandle);
// phandle(s): NCCL's profiler parents (v10+), nullptr before.
ncclResult_t isend(void* send_comm, void* data, size_t size, int tag, void* mhandle, void** request,
                   void* phandle = nullptr);
ncclResult_t irecv(void* recv_comm, int n, void** data, const size_t* sizes, const int* tags,
                   void** mhandles, void** request, void** phandles = nullptr);
ncclResult_t iflush(void* recv_comm, int n, void** data, const int* sizes, void** mhandles,
                    void** request);
ncclResult_t test(void* request, int* done, int* sizes);
ncclResult_t close_send(void* send_comm);
ncclResult_t close_recv(void* recv_comm);
ncclResult_t close_listen(void* listen_comm);
CommConfig context_config(void* ctx);

}  // namespace weft::abi
