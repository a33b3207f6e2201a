#include "core/net_events.h"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <iterator>
#include <string>

#include "weft/log.h"

namespace weft {

namespace detail {
std::atomic<bool> g_net_profiler_on{false};
}  // namespace detail

namespace {

std::atomic<ncclProfilerCallback_t> g_callback{nullptr};

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

// Starts one event; its handle, or null when NCCL's profiler did not take it.
void* start_event(void* parent, int device, const Request& request, int opcode, uint32_t qp_num,
                  size_t length) {
  ncclProfilerCallback_t callback = g_callback.load(std::memory_order_relaxed);
  if (callback == nullptr) return nullptr;
  ncclProfilerNetIbDescr_v1_t descr{};
  descr.type = ncclProfileQp;
  descr.qp.device = device;
  descr.qp.wr_id = reinterpret_cast<uintptr_t>(&request);
  descr.qp.opcode = opcode;
  descr.qp.qpNum = qp_num;  // 0: the whole request, not one queue pair's share
  descr.qp.length = length;
  // NCCL writes the handle only when its profiler took the event.
  void* handle = nullptr;
  callback(&handle, ncclProfilerNetEventStart, parent, kPluginId, &descr);
  return handle;
}

void stop_event(void* handle) {
  ncclProfilerCallback_t callback = g_callback.load(std::memory_order_relaxed);
  if (callback != nullptr) callback(&handle, ncclProfilerNetEventStop, nullptr, 0, nullptr);
}

int events_started(const NetEventHandles& events) {
  int started = events.count;
  for (int i = 0; i < events.share_count; ++i) {
    started += events.shares[i].handle.load(std::memory_order_acquire) != nullptr;
  }
  return started;
}

void start_one(NetEventHandles& events, void* parent, int device, const Request& request,
               int opcode, size_t length) {
  if (parent == nullptr || events_started(events) >= NetEventHandles::kMaxEvents) return;
  if (void* handle = start_event(parent, device, request, opcode, 0, length)) {
    events.handles[events.count++] = handle;
  }
}

}  // namespace

void set_net_profiler(ncclProfilerCallback_t callback, const std::string& mode) {
  if (callback == nullptr) return;
  const bool on = mode == "on" || (mode == "auto" && profiler_plugin_named());
  g_callback.store(callback, std::memory_order_relaxed);
  if (on && !detail::g_net_profiler_on.exchange(true, std::memory_order_relaxed)) {
    WEFT_INFO(NCCL_NET | NCCL_INIT, "network events for NCCL's profiler: on (WEFT_NET_PROFILER=%s)",
              mode.c_str());
  }
}

void start_send_event(Request& request, const Comm& comm, void* parent, size_t size) {
  if (parent == nullptr) return;
  NetEventHandles& events = events_of(request);
  start_one(events, parent, comm.nccl_device, request, kSendOpcode, size);
  events.send_parent = parent;
  events.device = comm.nccl_device;
  // The shares the transport posted, under the same parent: those already
  // complete get none (NCCL's profiler cannot take an event that ended
  // before it began).
  for (int i = 0; i < events.share_count; ++i) {
    NetEventHandles::Share& share = events.shares[i];
    if (share.done.load(std::memory_order_acquire) ||
        events_started(events) >= NetEventHandles::kMaxEvents) {
      continue;
    }
    share.handle.store(
        start_event(parent, comm.nccl_device, request, kSendOpcode, share.lane, share.length),
        std::memory_order_release);
    // Completed meanwhile on another thread: whoever takes the handle stops it.
    if (share.done.load(std::memory_order_acquire)) {
      if (void* handle = share.handle.exchange(nullptr, std::memory_order_acq_rel)) {
        stop_event(handle);
      }
    }
  }
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
  for (int i = 0; i < events.share_count; ++i) share_done_slow(events, i);
  events.share_count = 0;  // the request's next use starts with none
  events.send_parent = nullptr;
  for (int i = 0; i < events.count; ++i) {
    stop_event(events.handles[i]);
    events.handles[i] = nullptr;
  }
  events.count = 0;
}

void begin_shares(Request& request) {
  NetEventHandles& events = events_of(request);
  events.share_count = 0;
  events.send_parent = nullptr;
}

int record_share(Request& request, uint32_t lane, size_t length) {
  NetEventHandles& events = events_of(request);
  if (events.share_count >= static_cast<int>(std::size(events.shares))) return -1;
  NetEventHandles::Share& share = events.shares[events.share_count];
  share.handle.store(nullptr, std::memory_order_relaxed);
  share.done.store(false, std::memory_order_release);
  share.lane = lane;
  share.length = static_cast<uint32_t>(std::min<size_t>(length, UINT32_MAX));
  if (events.send_parent != nullptr && events_started(events) < NetEventHandles::kMaxEvents) {
    share.handle.store(
        start_event(events.send_parent, events.device, request, kSendOpcode, lane, length),
        std::memory_order_release);
  }
  return events.share_count++;
}

void share_done_on_lane(Request& request, uint32_t lane) {
  if (!request.net_events) return;
  NetEventHandles& events = *request.net_events;
  for (int i = 0; i < events.share_count; ++i) {
    if (events.shares[i].lane == lane) share_done_slow(events, i);
  }
}

void share_done_slow(NetEventHandles& events, int index) {
  if (index >= events.share_count) return;
  NetEventHandles::Share& share = events.shares[index];
  share.done.store(true, std::memory_order_release);
  if (void* handle = share.handle.exchange(nullptr, std::memory_order_acq_rel)) stop_event(handle);
}

}  // namespace weft
