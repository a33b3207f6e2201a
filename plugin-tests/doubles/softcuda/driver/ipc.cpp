// CUDA IPC: a handle names the exporting process's pid and memfd number,
// which another process opens through /proc/<pid>/fd/<n>.

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <mutex>

#include "driver/api.h"
#include "driver/config.h"
#include "driver/contexts.h"
#include "driver/counters.h"
#include "driver/ranges.h"
#include "driver/trace.h"

namespace softcuda {

namespace {

constexpr char kIpcMagic[8] = {'S', 'O', 'F', 'T', 'C', 'U', 'D', 'A'};

struct IpcHandle {
  char magic[8];
  int32_t pid;
  int32_t fd;
  uint64_t ino;
  uint64_t dev;
  uint64_t size;
  uint64_t mapped;
  uint64_t buffer_id;
  int32_t device;
  int32_t reserved;
};
static_assert(sizeof(IpcHandle) == CU_IPC_HANDLE_SIZE, "IPC handle must fill CUipcMemHandle");

}  // namespace

}  // namespace softcuda

using namespace softcuda;

SOFTCUDA_API CUresult cuIpcGetMemHandle(CUipcMemHandle* handle, CUdeviceptr dptr) {
  Trace t("cuIpcGetMemHandle", "dptr=0x%llx", dptr);
  REQUIRE_INIT(t);
  if (handle == nullptr) return t(CUDA_ERROR_INVALID_VALUE);
  IpcHandle h{};
  {
    std::lock_guard<std::mutex> lock(g_mu);
    const Range* r = find_range(dptr);
    if (r == nullptr || r->kind != Kind::Device) return t(CUDA_ERROR_INVALID_VALUE);
    struct stat st {};
    if (fstat(r->fd, &st) != 0) return t(CUDA_ERROR_OPERATING_SYSTEM);
    std::memcpy(h.magic, kIpcMagic, sizeof(h.magic));
    h.pid = static_cast<int32_t>(getpid());
    h.fd = r->fd;
    h.ino = static_cast<uint64_t>(st.st_ino);
    h.dev = static_cast<uint64_t>(st.st_dev);
    h.size = r->size;
    h.mapped = r->mapped;
    h.buffer_id = r->buffer_id;
    h.device = r->device;
  }
  std::memcpy(handle->reserved, &h, sizeof(h));
  g_ipc_exports.fetch_add(1);
  return t(CUDA_SUCCESS);
}

SOFTCUDA_API CUresult cuIpcOpenMemHandle_v2(CUdeviceptr* pdptr, CUipcMemHandle handle,
                                            unsigned int flags) {
  IpcHandle h{};
  std::memcpy(&h, handle.reserved, sizeof(h));
  Trace t("cuIpcOpenMemHandle_v2", "pid=%d, fd=%d, buffer id=%llu, flags=%u", h.pid, h.fd,
          static_cast<unsigned long long>(h.buffer_id), flags);
  REQUIRE_INIT(t);
  if (pdptr == nullptr || flags != CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS)
    return t(CUDA_ERROR_INVALID_VALUE);
  if (std::memcmp(h.magic, kIpcMagic, sizeof(h.magic)) != 0 || h.mapped == 0 || h.size == 0) {
    return t(CUDA_ERROR_INVALID_VALUE);
  }
  int dev = 0;
  CUresult r = current_device(&dev);
  if (r != CUDA_SUCCESS) return t(r);
  // The real driver refuses to open a handle in the process that exported it.
  if (h.pid == static_cast<int32_t>(getpid()) && !env_flag("SOFTCUDA_IPC_SAME_PROCESS", false)) {
    return t(CUDA_ERROR_INVALID_CONTEXT);
  }
  const IpcKey key{h.pid, h.buffer_id};
  {
    std::lock_guard<std::mutex> lock(g_mu);
    auto it = g_ipc_by_key.find(key);
    if (it != g_ipc_by_key.end()) {
      Range& existing = g_ranges.at(it->second);
      ++existing.ipc_refs;
      *pdptr = existing.base;
      g_ipc_opens.fetch_add(1);
      return t(CUDA_SUCCESS);
    }
  }
  char path[64];
  std::snprintf(path, sizeof(path), "/proc/%d/fd/%d", h.pid, h.fd);
  int fd = open(path, O_RDWR | O_CLOEXEC);
  if (fd < 0) return t(CUDA_ERROR_INVALID_HANDLE);
  struct stat st {};
  if (fstat(fd, &st) != 0 || static_cast<uint64_t>(st.st_ino) != h.ino ||
      static_cast<uint64_t>(st.st_dev) != h.dev || static_cast<uint64_t>(st.st_size) < h.mapped) {
    close(fd);  // the exporter freed the allocation; its fd number was reused
    return t(CUDA_ERROR_INVALID_HANDLE);
  }
  Range range;
  range.kind = Kind::IpcImport;
  range.size = h.size;
  range.mapped = h.mapped;
  range.device = valid_device(h.device) ? h.device : dev;
  range.buffer_id = g_next_buffer_id.fetch_add(1);
  range.ipc_key = key;
  range.ipc_refs = 1;
  r = map_fd(fd, range.mapped, &range.base, &range.shadow);
  close(fd);
  if (r != CUDA_SUCCESS) return t(r);
  {
    std::lock_guard<std::mutex> lock(g_mu);
    auto it = g_ipc_by_key.find(key);
    if (it != g_ipc_by_key.end()) {  // another thread won the race
      Range& existing = g_ranges.at(it->second);
      ++existing.ipc_refs;
      *pdptr = existing.base;
    } else {
      g_ranges[range.base] = range;
      g_ipc_by_key[key] = range.base;
      *pdptr = range.base;
      range.base = 0;
    }
  }
  if (range.base != 0) unmap_range(range);
  g_ipc_opens.fetch_add(1);
  return t(CUDA_SUCCESS);
}

SOFTCUDA_API CUresult cuIpcOpenMemHandle(CUdeviceptr* pdptr, CUipcMemHandle handle,
                                         unsigned int flags) {
  return cuIpcOpenMemHandle_v2(pdptr, handle, flags);
}

SOFTCUDA_API CUresult cuIpcCloseMemHandle(CUdeviceptr dptr) {
  Trace t("cuIpcCloseMemHandle", "dptr=0x%llx", dptr);
  REQUIRE_INIT(t);
  Range victim;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    auto it = g_ranges.find(dptr);
    if (it == g_ranges.end() || it->second.kind != Kind::IpcImport)
      return t(CUDA_ERROR_INVALID_VALUE);
    if (--it->second.ipc_refs > 0) return t(CUDA_SUCCESS);
    victim = it->second;
    g_ipc_by_key.erase(victim.ipc_key);
    g_ranges.erase(it);
  }
  unmap_range(victim);
  return t(CUDA_SUCCESS);
}
