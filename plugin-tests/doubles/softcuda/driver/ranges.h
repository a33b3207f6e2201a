// The address ranges the driver knows: device allocations, IPC mappings of
// another process's allocations, and pinned or registered host memory.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>

#include "cuda_abi.h"

namespace softcuda {

enum class Kind { Device, IpcImport, HostAlloc, HostRegistered };

struct IpcKey {
  int32_t pid;
  unsigned long long buffer_id;
  bool operator<(const IpcKey& o) const {
    return pid != o.pid ? pid < o.pid : buffer_id < o.buffer_id;
  }
};

// A range of addresses the driver knows: a device allocation, an IPC mapping
// of another process's allocation, or pinned / registered host memory.
struct Range {
  Kind kind = Kind::Device;
  uintptr_t base = 0;
  size_t size = 0;         // as requested
  size_t mapped = 0;       // page-rounded length of the mapping(s) we own
  char* shadow = nullptr;  // host-accessible alias of base (== base unless protected)
  int device = 0;
  int fd = -1;  // memfd of a device allocation
  bool sync_memops = false;
  unsigned long long buffer_id = 0;
  IpcKey ipc_key{0, 0};
  int ipc_refs = 0;

  bool is_device() const { return kind == Kind::Device || kind == Kind::IpcImport; }
  bool contains(uintptr_t p) const { return p >= base && p - base < size; }
};

extern std::mutex g_mu;                      // guards everything below, and streams and events
extern std::map<uintptr_t, Range> g_ranges;  // keyed by base
extern std::map<IpcKey, uintptr_t> g_ipc_by_key;

// Caller holds g_mu.
Range* find_range(uintptr_t p);
bool overlaps_any(uintptr_t p, size_t n);
// Takes g_mu.
unsigned long long count_kind(bool (*pred)(const Range&));
void unmap_range(const Range& r);
// Maps `mapped` bytes of fd for the driver: one read-write mapping, or with
// SOFTCUDA_PROTECT=1 an inaccessible view plus a read-write shadow.
CUresult map_fd(int fd, size_t mapped, uintptr_t* base, char** shadow);
// Resolves [p, p+n) for the host: a known range (device, IPC, pinned or
// registered host memory) must contain all of it, and its host-accessible
// alias is returned; an unknown address is plain host memory when
// allow_unknown, an error otherwise. Caller holds g_mu.
CUresult resolve(uintptr_t p, size_t n, bool allow_unknown, char** out);

}  // namespace softcuda
