#include "abi/net_profiler.h"

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "weft/log.h"

namespace weft::abi {
namespace {

std::atomic<ncclProfilerCallback_t> g_callback{nullptr};
std::atomic<bool> g_on{false};

constexpr int64_t kPluginId = NCCL_PROFILER_NET_TYPE_IB | NCCL_PROFILER_NET_IB_VER;
// ibv_wr_opcode's IBV_WR_SEND and ibv_wc_opcode's IBV_WC_RECV: a message
// sent, a message received (weft's own protocol may move it as a write).
constexpr int kSendOpcode = 2;
constexpr int kRecvOpcode = 128;

bool profiler_plugin_named() {
  const char* name = std::getenv("NCCL_PROFILER_PLUGIN");
  return name != nullptr && *name != '\0' && std::string(name) != "none";
}

NetEventHandles& events_of(Request& request) {
  if (!request.net_events) request.net_events = std::make_unique<NetEventHandles>();
  return *request.net_events;
}

void start_one(NetEventHandles& events, void* parent, int device, const Request& request,
               int opcode, size_t length) {
  if (parent == nullptr || events.count >= static_cast<int>(std::size(events.handles))) return;
  ncclProfilerCallback_t callback = g_callback.load(std::memory_order_relaxed);
  if (callback == nullptr) return;
  ncclProfilerNetIbDescr_v1_t descr{};
  descr.type = ncclProfileQp;
  descr.qp.device = device;
  descr.qp.wr_id = reinterpret_cast<uintptr_t>(&request);
  descr.qp.opcode = opcode;
  descr.qp.qpNum = 0;  // a request, not one queue pair's share of it
  descr.qp.length = length;
  // NCCL writes the handle only when its profiler took the event.
  void* handle = nullptr;
  callback(&handle, ncclProfilerNetEventStart, parent, kPluginId, &descr);
  if (handle != nullptr) events.handles[events.count++] = handle;
}

}  // namespace

void set_net_profiler(ncclProfilerCallback_t callback, const std::string& mode) {
  if (callback == nullptr) return;
  const bool on = mode == "on" || (mode == "auto" && profiler_plugin_named());
  g_callback.store(callback, std::memory_order_relaxed);
  if (on && !g_on.exchange(true, std::memory_order_relaxed)) {
    WEFT_INFO(NCCL_NET | NCCL_INIT, "network events for NCCL's profiler: on (WEFT_NET_PROFILER=%s)",
              mode.c_str());
  }
}

bool net_profiler_on() {
  return g_on.load(std::memory_order_relaxed);
}

void start_send_event(Request& request, const Comm& comm, void* parent, size_t size) {
  if (parent == nullptr) return;
  start_one(events_of(request), parent, comm.nccl_device, request, kSendOpcode, size);
}

void start_recv_events(Request& request, const Comm& comm, int n, void* const* parents,
                       const size_t* sizes) {
  if (parents == nullptr) return;
  NetEventHandles& events = events_of(request);
  for (int i = 0; i < n; ++i) {
    start_one(events, parents[i], comm.nccl_device, request, kRecvOpcode, sizes[i]);
  }
}

void stop_net_events_slow(NetEventHandles& events) {
  ncclProfilerCallback_t callback = g_callback.load(std::memory_order_relaxed);
  for (int i = 0; i < events.count; ++i) {
    void* handle = events.handles[i];
    if (callback != nullptr) callback(&handle, ncclProfilerNetEventStop, nullptr, 0, nullptr);
    events.handles[i] = nullptr;
  }
  events.count = 0;
}

}  // namespace weft::abi
