// The softcuda_* test controls of softcuda.h.

#include <mutex>

#include "driver/api.h"
#include "driver/counters.h"
#include "driver/ranges.h"
#include "softcuda.h"

using namespace softcuda;

SOFTCUDA_API int softcuda_present(void) {
  return 1;
}
SOFTCUDA_API unsigned long long softcuda_flush_count(void) {
  return g_flushes.load();
}
SOFTCUDA_API unsigned long long softcuda_live_allocations(void) {
  return count_kind([](const Range& r) { return r.kind == Kind::Device; });
}
SOFTCUDA_API unsigned long long softcuda_total_allocations(void) {
  return g_total_allocations.load();
}
SOFTCUDA_API unsigned long long softcuda_dmabuf_exports(void) {
  return g_dmabuf_exports.load();
}
SOFTCUDA_API unsigned long long softcuda_ipc_exports(void) {
  return g_ipc_exports.load();
}
SOFTCUDA_API unsigned long long softcuda_ipc_opens(void) {
  return g_ipc_opens.load();
}
SOFTCUDA_API unsigned long long softcuda_live_ipc_mappings(void) {
  return count_kind([](const Range& r) { return r.kind == Kind::IpcImport; });
}
SOFTCUDA_API unsigned long long softcuda_memcpy_count(void) {
  return g_memcpy_count.load();
}
SOFTCUDA_API unsigned long long softcuda_memcpy_bytes(void) {
  return g_memcpy_bytes.load();
}
SOFTCUDA_API unsigned long long softcuda_live_host_registrations(void) {
  return count_kind(
      [](const Range& r) { return r.kind == Kind::HostAlloc || r.kind == Kind::HostRegistered; });
}
SOFTCUDA_API void softcuda_reset_counters(void) {
  g_flushes.store(0);
  g_dmabuf_exports.store(0);
  g_ipc_exports.store(0);
  g_ipc_opens.store(0);
  g_memcpy_count.store(0);
  g_memcpy_bytes.store(0);
}
SOFTCUDA_API int softcuda_allocation_fd(unsigned long long ptr) {
  std::lock_guard<std::mutex> lock(g_mu);
  const Range* r = find_range(ptr);
  return r != nullptr && r->kind == Kind::Device ? r->fd : -1;
}
