// The address ranges the driver knows: device allocations, IPC mappings of
// another process's allocations, and pinned or registered host memory.

#include "driver/ranges.h"

#include <sys/mman.h>
#include <unistd.h>

#include "driver/config.h"

namespace softcuda {

std::mutex g_mu;
std::map<uintptr_t, Range> g_ranges;
std::map<IpcKey, uintptr_t> g_ipc_by_key;

Range* find_range(uintptr_t p) {
  auto it = g_ranges.upper_bound(p);
  if (it == g_ranges.begin()) return nullptr;
  --it;
  return it->second.contains(p) ? &it->second : nullptr;
}

bool overlaps_any(uintptr_t p, size_t n) {
  auto it = g_ranges.lower_bound(p + n);
  if (it == g_ranges.begin()) return false;
  --it;
  return it->second.base + it->second.size > p;
}

unsigned long long count_kind(bool (*pred)(const Range&)) {
  std::lock_guard<std::mutex> lock(g_mu);
  unsigned long long n = 0;
  for (const auto& [base, r] : g_ranges) n += pred(r) ? 1 : 0;
  return n;
}

void unmap_range(const Range& r) {
  if (r.kind == Kind::HostRegistered) return;
  if (r.shadow != nullptr && reinterpret_cast<uintptr_t>(r.shadow) != r.base) {
    munmap(r.shadow, r.mapped);
  }
  munmap(reinterpret_cast<void*>(r.base), r.mapped);
  if (r.fd >= 0) close(r.fd);
}

CUresult map_fd(int fd, size_t mapped, uintptr_t* base, char** shadow) {
  void* rw = mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (rw == MAP_FAILED) return CUDA_ERROR_MAP_FAILED;
  if (!env_flag("SOFTCUDA_PROTECT", false)) {
    *base = reinterpret_cast<uintptr_t>(rw);
    *shadow = static_cast<char*>(rw);
    return CUDA_SUCCESS;
  }
  void* view = mmap(nullptr, mapped, PROT_NONE, MAP_SHARED, fd, 0);
  if (view == MAP_FAILED) {
    munmap(rw, mapped);
    return CUDA_ERROR_MAP_FAILED;
  }
  *base = reinterpret_cast<uintptr_t>(view);
  *shadow = static_cast<char*>(rw);
  return CUDA_SUCCESS;
}

CUresult resolve(uintptr_t p, size_t n, bool allow_unknown, char** out) {
  Range* r = find_range(p);
  if (r == nullptr) {
    if (!allow_unknown || p == 0) return CUDA_ERROR_INVALID_VALUE;
    *out = reinterpret_cast<char*>(p);
    return CUDA_SUCCESS;
  }
  if (n > r->size - (p - r->base)) return CUDA_ERROR_INVALID_VALUE;
  *out = r->shadow + (p - r->base);
  return CUDA_SUCCESS;
}

}  // namespace softcuda
