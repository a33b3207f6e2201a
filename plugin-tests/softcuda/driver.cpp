// softcuda libcuda.so.1: a test double of the CUDA driver API. See softcuda.h
// for what it models, its environment knobs and its counters.
//
// Fidelity notes (where the double knowingly differs from a real driver):
// - The plain (unversioned) names of functions that have a _v2 variant, such
//   as cuMemAlloc or cuMemGetAddressRange, are exported with the 64-bit _v2
//   semantics. In the real libcuda they are 32-bit legacy entry points
//   (CUdeviceptr_v1, unsigned int sizes); libfabric 2.6 dlsym()s several of
//   them by their plain names (cuMemGetAddressRange, cuStreamDestroy,
//   cuEventDestroy, cuMemcpyDtoDAsync).
// - cuGetProcAddress resolves only the current (_v2 ...) variant of each
//   function; a cudaVersion older than that variant gets
//   CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT instead of a legacy variant.
// - Work is synchronous: streams and events are bookkeeping only.
// - A current context is required where the real driver needs one to pick a
//   device (allocations, IPC opens, streams, events, flushes); copies, memset
//   and pointer queries work in any thread once cuInit has succeeded.

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "cuda_abi.h"
#include "softcuda.h"

#define SOFTCUDA_API extern "C" __attribute__((visibility("default")))

namespace {

// ------------------------------------------------------------ environment --
long env_long(const char* name, long fallback) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return fallback;
  char* end = nullptr;
  long x = std::strtol(v, &end, 0);
  return (end == nullptr || *end != '\0') ? fallback : x;
}

bool env_flag(const char* name, bool fallback) {
  return env_long(name, fallback ? 1 : 0) != 0;
}

constexpr int kMaxDevices = 16;
constexpr int kDefaultDriverVersion = 13000;

int device_count() {
  return static_cast<int>(std::clamp(env_long("SOFTCUDA_DEVICES", 1), 0L, 16L));
}
int driver_version() {
  return static_cast<int>(env_long("SOFTCUDA_DRIVER_VERSION", kDefaultDriverVersion));
}
bool gdr_supported() {
  return env_flag("SOFTCUDA_GDR", true);
}
bool dmabuf_supported() {
  return env_flag("SOFTCUDA_DMABUF", true);
}
bool valid_device(CUdevice dev) {
  return dev >= 0 && dev < device_count();
}

size_t page_size() {
  static const size_t size = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return size;
}
size_t round_up_pages(size_t n) {
  return (n + page_size() - 1) / page_size() * page_size();
}

// ------------------------------------------------------------ error names --
struct ErrorInfo {
  int code;
  const char* name;
  const char* text;
};

// All CUresult values of CUDA 13.0, with the driver's messages for the common
// ones and a readable form of the name for the rest.
constexpr ErrorInfo kDriverErrors[] = {
    {0, "CUDA_SUCCESS", "no error"},
    {1, "CUDA_ERROR_INVALID_VALUE", "invalid argument"},
    {2, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory"},
    {3, "CUDA_ERROR_NOT_INITIALIZED", "initialization error"},
    {4, "CUDA_ERROR_DEINITIALIZED", "driver shutting down"},
    {5, "CUDA_ERROR_PROFILER_DISABLED", "profiler disabled"},
    {6, "CUDA_ERROR_PROFILER_NOT_INITIALIZED", "profiler not initialized"},
    {7, "CUDA_ERROR_PROFILER_ALREADY_STARTED", "profiler already started"},
    {8, "CUDA_ERROR_PROFILER_ALREADY_STOPPED", "profiler already stopped"},
    {34, "CUDA_ERROR_STUB_LIBRARY", "stub library"},
    {36, "CUDA_ERROR_CALL_REQUIRES_NEWER_DRIVER", "call requires newer driver"},
    {46, "CUDA_ERROR_DEVICE_UNAVAILABLE", "device unavailable"},
    {100, "CUDA_ERROR_NO_DEVICE", "no CUDA-capable device is detected"},
    {101, "CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal"},
    {102, "CUDA_ERROR_DEVICE_NOT_LICENSED", "device not licensed"},
    {200, "CUDA_ERROR_INVALID_IMAGE", "invalid image"},
    {201, "CUDA_ERROR_INVALID_CONTEXT", "invalid device context"},
    {202, "CUDA_ERROR_CONTEXT_ALREADY_CURRENT", "context already current"},
    {205, "CUDA_ERROR_MAP_FAILED", "mapping of buffer object failed"},
    {206, "CUDA_ERROR_UNMAP_FAILED", "unmap failed"},
    {207, "CUDA_ERROR_ARRAY_IS_MAPPED", "array is mapped"},
    {208, "CUDA_ERROR_ALREADY_MAPPED", "resource already mapped"},
    {209, "CUDA_ERROR_NO_BINARY_FOR_GPU", "no binary for gpu"},
    {210, "CUDA_ERROR_ALREADY_ACQUIRED", "already acquired"},
    {211, "CUDA_ERROR_NOT_MAPPED", "not mapped"},
    {212, "CUDA_ERROR_NOT_MAPPED_AS_ARRAY", "not mapped as array"},
    {213, "CUDA_ERROR_NOT_MAPPED_AS_POINTER", "not mapped as pointer"},
    {214, "CUDA_ERROR_ECC_UNCORRECTABLE", "ecc uncorrectable"},
    {215, "CUDA_ERROR_UNSUPPORTED_LIMIT", "unsupported limit"},
    {216, "CUDA_ERROR_CONTEXT_ALREADY_IN_USE", "context already in use"},
    {217, "CUDA_ERROR_PEER_ACCESS_UNSUPPORTED",
     "peer access is not supported between these two devices"},
    {218, "CUDA_ERROR_INVALID_PTX", "invalid ptx"},
    {219, "CUDA_ERROR_INVALID_GRAPHICS_CONTEXT", "invalid graphics context"},
    {220, "CUDA_ERROR_NVLINK_UNCORRECTABLE", "nvlink uncorrectable"},
    {221, "CUDA_ERROR_JIT_COMPILER_NOT_FOUND", "jit compiler not found"},
    {222, "CUDA_ERROR_UNSUPPORTED_PTX_VERSION", "unsupported ptx version"},
    {223, "CUDA_ERROR_JIT_COMPILATION_DISABLED", "jit compilation disabled"},
    {224, "CUDA_ERROR_UNSUPPORTED_EXEC_AFFINITY", "unsupported exec affinity"},
    {225, "CUDA_ERROR_UNSUPPORTED_DEVSIDE_SYNC", "unsupported devside sync"},
    {226, "CUDA_ERROR_CONTAINED", "contained"},
    {300, "CUDA_ERROR_INVALID_SOURCE", "invalid source"},
    {301, "CUDA_ERROR_FILE_NOT_FOUND", "file not found"},
    {302, "CUDA_ERROR_SHARED_OBJECT_SYMBOL_NOT_FOUND", "shared object symbol not found"},
    {303, "CUDA_ERROR_SHARED_OBJECT_INIT_FAILED", "shared object init failed"},
    {304, "CUDA_ERROR_OPERATING_SYSTEM", "OS call failed or operation not supported on this OS"},
    {400, "CUDA_ERROR_INVALID_HANDLE", "invalid resource handle"},
    {401, "CUDA_ERROR_ILLEGAL_STATE", "illegal state"},
    {402, "CUDA_ERROR_LOSSY_QUERY", "lossy query"},
    {500, "CUDA_ERROR_NOT_FOUND", "named symbol not found"},
    {600, "CUDA_ERROR_NOT_READY", "device not ready"},
    {700, "CUDA_ERROR_ILLEGAL_ADDRESS", "illegal address"},
    {701, "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES", "launch out of resources"},
    {702, "CUDA_ERROR_LAUNCH_TIMEOUT", "launch timeout"},
    {703, "CUDA_ERROR_LAUNCH_INCOMPATIBLE_TEXTURING", "launch incompatible texturing"},
    {704, "CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED", "peer access already enabled"},
    {705, "CUDA_ERROR_PEER_ACCESS_NOT_ENABLED", "peer access not enabled"},
    {708, "CUDA_ERROR_PRIMARY_CONTEXT_ACTIVE", "primary context active"},
    {709, "CUDA_ERROR_CONTEXT_IS_DESTROYED", "context is destroyed"},
    {710, "CUDA_ERROR_ASSERT", "assert"},
    {711, "CUDA_ERROR_TOO_MANY_PEERS", "too many peers"},
    {712, "CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED",
     "part or all of the requested memory range is already mapped"},
    {713, "CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED",
     "pointer does not correspond to a registered memory region"},
    {714, "CUDA_ERROR_HARDWARE_STACK_ERROR", "hardware stack error"},
    {715, "CUDA_ERROR_ILLEGAL_INSTRUCTION", "illegal instruction"},
    {716, "CUDA_ERROR_MISALIGNED_ADDRESS", "misaligned address"},
    {717, "CUDA_ERROR_INVALID_ADDRESS_SPACE", "invalid address space"},
    {718, "CUDA_ERROR_INVALID_PC", "invalid pc"},
    {719, "CUDA_ERROR_LAUNCH_FAILED", "launch failed"},
    {720, "CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE", "cooperative launch too large"},
    {721, "CUDA_ERROR_TENSOR_MEMORY_LEAK", "tensor memory leak"},
    {800, "CUDA_ERROR_NOT_PERMITTED", "operation not permitted"},
    {801, "CUDA_ERROR_NOT_SUPPORTED", "operation not supported"},
    {802, "CUDA_ERROR_SYSTEM_NOT_READY", "system not ready"},
    {803, "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH", "system driver mismatch"},
    {804, "CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE", "compat not supported on device"},
    {805, "CUDA_ERROR_MPS_CONNECTION_FAILED", "mps connection failed"},
    {806, "CUDA_ERROR_MPS_RPC_FAILURE", "mps rpc failure"},
    {807, "CUDA_ERROR_MPS_SERVER_NOT_READY", "mps server not ready"},
    {808, "CUDA_ERROR_MPS_MAX_CLIENTS_REACHED", "mps max clients reached"},
    {809, "CUDA_ERROR_MPS_MAX_CONNECTIONS_REACHED", "mps max connections reached"},
    {810, "CUDA_ERROR_MPS_CLIENT_TERMINATED", "mps client terminated"},
    {811, "CUDA_ERROR_CDP_NOT_SUPPORTED", "cdp not supported"},
    {812, "CUDA_ERROR_CDP_VERSION_MISMATCH", "cdp version mismatch"},
    {900, "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED", "stream capture unsupported"},
    {901, "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED", "stream capture invalidated"},
    {902, "CUDA_ERROR_STREAM_CAPTURE_MERGE", "stream capture merge"},
    {903, "CUDA_ERROR_STREAM_CAPTURE_UNMATCHED", "stream capture unmatched"},
    {904, "CUDA_ERROR_STREAM_CAPTURE_UNJOINED", "stream capture unjoined"},
    {905, "CUDA_ERROR_STREAM_CAPTURE_ISOLATION", "stream capture isolation"},
    {906, "CUDA_ERROR_STREAM_CAPTURE_IMPLICIT", "stream capture implicit"},
    {907, "CUDA_ERROR_CAPTURED_EVENT", "captured event"},
    {908, "CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD", "stream capture wrong thread"},
    {909, "CUDA_ERROR_TIMEOUT", "timeout"},
    {910, "CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE", "graph exec update failure"},
    {911, "CUDA_ERROR_EXTERNAL_DEVICE", "external device"},
    {912, "CUDA_ERROR_INVALID_CLUSTER_SIZE", "invalid cluster size"},
    {913, "CUDA_ERROR_FUNCTION_NOT_LOADED", "function not loaded"},
    {914, "CUDA_ERROR_INVALID_RESOURCE_TYPE", "invalid resource type"},
    {915, "CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION", "invalid resource configuration"},
    {916, "CUDA_ERROR_KEY_ROTATION", "key rotation"},
    {999, "CUDA_ERROR_UNKNOWN", "unknown error"},
};

const ErrorInfo* find_error(int code) {
  for (const ErrorInfo& e : kDriverErrors) {
    if (e.code == code) return &e;
  }
  return nullptr;
}

const char* error_name(CUresult r) {
  const ErrorInfo* e = find_error(r);
  return e != nullptr ? e->name : "CUDA_ERROR_<unrecognized>";
}

// ---------------------------------------------------------------- tracing --
// One per API call: formats the arguments when SOFTCUDA_LOG=1 and logs them
// with the result when the call returns through operator().
class Trace {
 public:
  explicit Trace(const char* name) : on_(env_flag("SOFTCUDA_LOG", false)), name_(name) {
    args_[0] = '\0';
  }
  Trace(const char* name, const char* fmt, ...) __attribute__((format(printf, 3, 4)))
  : on_(env_flag("SOFTCUDA_LOG", false)), name_(name) {
    args_[0] = '\0';
    if (!on_) return;
    va_list ap;
    va_start(ap, fmt);
    std::vsnprintf(args_, sizeof(args_), fmt, ap);
    va_end(ap);
  }
  CUresult operator()(CUresult r) const {
    if (on_) std::fprintf(stderr, "softcuda: %s(%s) = %s\n", name_, args_, error_name(r));
    return r;
  }

 private:
  bool on_;
  const char* name_;
  char args_[256];
};

// --------------------------------------------------------------- counters --
std::atomic<unsigned long long> g_flushes{0};
std::atomic<unsigned long long> g_total_allocations{0};
std::atomic<unsigned long long> g_dmabuf_exports{0};
std::atomic<unsigned long long> g_ipc_exports{0};
std::atomic<unsigned long long> g_ipc_opens{0};
std::atomic<unsigned long long> g_memcpy_count{0};
std::atomic<unsigned long long> g_memcpy_bytes{0};
std::atomic<unsigned long long> g_next_buffer_id{1};

// ----------------------------------------------------------------- state ---
std::atomic<bool> g_initialized{false};

constexpr uint32_t kCtxMagic = 0x43545853;  // "SXTC"
}  // namespace

// The primary context of each device. Only primary contexts exist.
struct CUctx_st {
  uint32_t magic = kCtxMagic;
  int device = 0;
  std::atomic<int> retains{0};
};

struct CUstream_st {
  int device;
};
struct CUevent_st {
  int device;
};

namespace {
CUctx_st g_ctx[kMaxDevices];
thread_local std::vector<CUcontext> t_ctx_stack;

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

std::mutex g_mu;                      // guards everything below
std::map<uintptr_t, Range> g_ranges;  // keyed by base
std::map<IpcKey, uintptr_t> g_ipc_by_key;
std::set<CUstream_st*> g_streams;
std::set<CUevent_st*> g_events;

// Caller holds g_mu.
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

// Maps `mapped` bytes of fd for the driver: one read-write mapping, or with
// SOFTCUDA_PROTECT=1 an inaccessible view plus a read-write shadow.
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

// ---------------------------------------------------------------- context --
bool valid_ctx(CUcontext ctx) {
  for (const CUctx_st& c : g_ctx) {
    if (&c == ctx) return c.magic == kCtxMagic;
  }
  return false;
}

CUcontext current_ctx() {
  return t_ctx_stack.empty() ? nullptr : t_ctx_stack.back();
}

// The device of the calling thread's current context, which must be a live
// (retained) primary context of an existing device.
CUresult current_device(int* dev) {
  CUcontext ctx = current_ctx();
  if (ctx == nullptr || !valid_ctx(ctx) || ctx->retains.load() <= 0 || !valid_device(ctx->device)) {
    return CUDA_ERROR_INVALID_CONTEXT;
  }
  *dev = ctx->device;
  return CUDA_SUCCESS;
}

bool initialized() {
  return g_initialized.load(std::memory_order_acquire);
}

// ------------------------------------------------------------ PCI bus ids --
struct PciId {
  unsigned domain, bus, device, function;
};

PciId pci_id(int dev) {
  PciId id{0, 0x18u + 4u * static_cast<unsigned>(dev), 0, 0};
  const char* list = std::getenv("SOFTCUDA_PCI_BUS_IDS");
  if (list == nullptr) return id;
  std::string s(list);
  size_t start = 0;
  for (int i = 0; start <= s.size(); ++i) {
    size_t comma = s.find(',', start);
    std::string item =
        s.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (i == dev) {
      PciId parsed{0, 0, 0, 0};
      if (std::sscanf(item.c_str(), "%x:%x:%x.%x", &parsed.domain, &parsed.bus, &parsed.device,
                      &parsed.function) == 4) {
        return parsed;
      }
      return id;
    }
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return id;
}

// ------------------------------------------------------------------ copies --
// Resolves [p, p+n) for the host: a known range (device, IPC, pinned or
// registered host memory) must contain all of it, and its host-accessible
// alias is returned; an unknown address is plain host memory when
// allow_unknown, an error otherwise. Caller holds g_mu.
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

enum class Side { Device, Host, Any };

CUresult do_copy(uintptr_t dst, Side dst_side, uintptr_t src, Side src_side, size_t n) {
  if (!initialized()) return CUDA_ERROR_NOT_INITIALIZED;
  if (n == 0) return CUDA_SUCCESS;
  char* d = nullptr;
  const char* s = nullptr;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    char* tmp = nullptr;
    CUresult r = resolve(dst, n, dst_side != Side::Device, &tmp);
    if (r != CUDA_SUCCESS) return r;
    d = tmp;
    r = resolve(src, n, src_side != Side::Device, &tmp);
    if (r != CUDA_SUCCESS) return r;
    s = tmp;
  }
  std::memmove(d, s, n);
  g_memcpy_count.fetch_add(1);
  g_memcpy_bytes.fetch_add(n);
  return CUDA_SUCCESS;
}

bool valid_stream(CUstream s) {
  if (s == nullptr) return true;
  std::lock_guard<std::mutex> lock(g_mu);
  return g_streams.count(s) != 0;
}

// --------------------------------------------------------------- IPC ------
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

// -------------------------------------------------------- pointer queries --
unsigned memory_type(const Range& r) {
  return r.is_device() ? CU_MEMORYTYPE_DEVICE : CU_MEMORYTYPE_HOST;
}

// Caller holds g_mu; r is null for an address the driver does not know.
CUresult pointer_attribute(const Range* r, CUpointer_attribute attr, void* data, uintptr_t p) {
  if (r == nullptr) return CUDA_ERROR_INVALID_VALUE;
  switch (attr) {
    case CU_POINTER_ATTRIBUTE_CONTEXT:
      *static_cast<CUcontext*>(data) = &g_ctx[r->device];
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
      *static_cast<unsigned*>(data) = memory_type(*r);
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_DEVICE_POINTER:
      *static_cast<CUdeviceptr*>(data) = p;
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_HOST_POINTER:
      if (r->is_device()) return CUDA_ERROR_INVALID_VALUE;
      *static_cast<void**>(data) = reinterpret_cast<void*>(p);
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_SYNC_MEMOPS:
      *static_cast<unsigned*>(data) = r->sync_memops ? 1 : 0;
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_BUFFER_ID:
      *static_cast<unsigned long long*>(data) = r->buffer_id;
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_IS_MANAGED:
      *static_cast<unsigned*>(data) = 0;
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
      *static_cast<int*>(data) = r->device;
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE:
      *static_cast<unsigned*>(data) = r->kind == Kind::Device ? 1 : 0;
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
      *static_cast<CUdeviceptr*>(data) = r->base;
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
      *static_cast<size_t*>(data) = r->size;
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_MAPPED:
      *static_cast<unsigned*>(data) = 1;
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_IS_GPU_DIRECT_RDMA_CAPABLE:
      *static_cast<unsigned*>(data) = r->is_device() && gdr_supported() ? 1 : 0;
      return CUDA_SUCCESS;
    default:
      return CUDA_ERROR_INVALID_VALUE;
  }
}

// The "NULL" values cuPointerGetAttributes reports for an unknown address.
CUresult default_attribute(CUpointer_attribute attr, void* data) {
  switch (attr) {
    case CU_POINTER_ATTRIBUTE_CONTEXT:
      *static_cast<CUcontext*>(data) = nullptr;
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_DEVICE_POINTER:
    case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
      *static_cast<CUdeviceptr*>(data) = 0;
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_HOST_POINTER:
      *static_cast<void**>(data) = nullptr;
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_BUFFER_ID:
      *static_cast<unsigned long long*>(data) = 0;
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
      *static_cast<size_t*>(data) = 0;
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
      *static_cast<int*>(data) = -2;  // what the runtime reports for unregistered memory
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
    case CU_POINTER_ATTRIBUTE_SYNC_MEMOPS:
    case CU_POINTER_ATTRIBUTE_IS_MANAGED:
    case CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE:
    case CU_POINTER_ATTRIBUTE_MAPPED:
    case CU_POINTER_ATTRIBUTE_IS_GPU_DIRECT_RDMA_CAPABLE:
      *static_cast<unsigned*>(data) = 0;
      return CUDA_SUCCESS;
    default:
      return CUDA_ERROR_INVALID_VALUE;
  }
}

// Device attributes with a fixed value: an H100 SXM, as far as it matters.
struct AttributeValue {
  CUdevice_attribute attribute;
  int value;
};

constexpr AttributeValue kFixedAttributes[] = {
    {CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK, 1024},
    {CU_DEVICE_ATTRIBUTE_WARP_SIZE, 32},
    {CU_DEVICE_ATTRIBUTE_CLOCK_RATE, 1980000},
    {CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, 132},
    {CU_DEVICE_ATTRIBUTE_INTEGRATED, 0},
    {CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY, 1},
    {CU_DEVICE_ATTRIBUTE_COMPUTE_MODE, 0},
    {CU_DEVICE_ATTRIBUTE_CONCURRENT_KERNELS, 1},
    {CU_DEVICE_ATTRIBUTE_ECC_ENABLED, 1},
    {CU_DEVICE_ATTRIBUTE_TCC_DRIVER, 0},
    {CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT, 3},
    {CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING, 1},
    {CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, 9},
    {CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, 0},
    {CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY, 1},
    {CU_DEVICE_ATTRIBUTE_CAN_FLUSH_REMOTE_WRITES, 0},
    {CU_DEVICE_ATTRIBUTE_HOST_REGISTER_SUPPORTED, 1},
    // No cuMemCreate / cuMemMap / memory pools / IPC events in the double:
    // reported absent so that callers stay on what it implements.
    {CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, 0},
    {CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED, 0},
    {CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED, 0},
    {CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED, 0},
    {CU_DEVICE_ATTRIBUTE_IPC_EVENT_SUPPORTED, 0},
    {CU_DEVICE_ATTRIBUTE_HOST_ALLOC_DMA_BUF_SUPPORTED, 0},
};

const AttributeValue* fixed_attribute(CUdevice_attribute attribute) {
  for (const AttributeValue& a : kFixedAttributes) {
    if (a.attribute == attribute) return &a;
  }
  return nullptr;
}

}  // namespace

#define REQUIRE_INIT(t) \
  if (!initialized()) return t(CUDA_ERROR_NOT_INITIALIZED)

// ======================================================== initialisation ===
SOFTCUDA_API CUresult cuInit(unsigned int flags) {
  Trace t("cuInit", "flags=%u", flags);
  if (flags != 0) return t(CUDA_ERROR_INVALID_VALUE);
  if (initialized()) return t(CUDA_SUCCESS);
  if (device_count() == 0) return t(CUDA_ERROR_NO_DEVICE);
  for (int i = 0; i < kMaxDevices; ++i) g_ctx[i].device = i;
  g_initialized.store(true, std::memory_order_release);
  return t(CUDA_SUCCESS);
}

SOFTCUDA_API CUresult cuDriverGetVersion(int* version) {
  Trace t("cuDriverGetVersion");
  if (version == nullptr) return t(CUDA_ERROR_INVALID_VALUE);
  *version = driver_version();
  return t(CUDA_SUCCESS);
}

SOFTCUDA_API CUresult cuGetErrorString(CUresult error, const char** str) {
  const ErrorInfo* e = find_error(error);
  if (str == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (e == nullptr) {
    *str = nullptr;
    return CUDA_ERROR_INVALID_VALUE;
  }
  *str = e->text;
  return CUDA_SUCCESS;
}

SOFTCUDA_API CUresult cuGetErrorName(CUresult error, const char** str) {
  const ErrorInfo* e = find_error(error);
  if (str == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (e == nullptr) {
    *str = nullptr;
    return CUDA_ERROR_INVALID_VALUE;
  }
  *str = e->name;
  return CUDA_SUCCESS;
}

// ================================================================ devices ===
SOFTCUDA_API CUresult cuDeviceGetCount(int* count) {
  Trace t("cuDeviceGetCount");
  REQUIRE_INIT(t);
  if (count == nullptr) return t(CUDA_ERROR_INVALID_VALUE);
  *count = device_count();
  return t(CUDA_SUCCESS);
}

SOFTCUDA_API CUresult cuDeviceGet(CUdevice* device, int ordinal) {
  Trace t("cuDeviceGet", "ordinal=%d", ordinal);
  REQUIRE_INIT(t);
  if (device == nullptr) return t(CUDA_ERROR_INVALID_VALUE);
  if (!valid_device(ordinal)) return t(CUDA_ERROR_INVALID_DEVICE);
  *device = ordinal;
  return t(CUDA_SUCCESS);
}

SOFTCUDA_API CUresult cuDeviceGetName(char* name, int len, CUdevice dev) {
  Trace t("cuDeviceGetName", "len=%d, dev=%d", len, dev);
  REQUIRE_INIT(t);
  if (name == nullptr || len <= 0) return t(CUDA_ERROR_INVALID_VALUE);
  if (!valid_device(dev)) return t(CUDA_ERROR_INVALID_DEVICE);
  std::snprintf(name, static_cast<size_t>(len), "NVIDIA H100 80GB HBM3 (softcuda)");
  return t(CUDA_SUCCESS);
}

SOFTCUDA_API CUresult cuDeviceGetPCIBusId(char* bus_id, int len, CUdevice dev) {
  Trace t("cuDeviceGetPCIBusId", "len=%d, dev=%d", len, dev);
  REQUIRE_INIT(t);
  if (bus_id == nullptr || len < 13) return t(CUDA_ERROR_INVALID_VALUE);
  if (!valid_device(dev)) return t(CUDA_ERROR_INVALID_DEVICE);
  PciId id = pci_id(dev);
  // The real driver spells the hex digits in upper case ("0000:3B:00.0").
  std::snprintf(bus_id, static_cast<size_t>(len), "%04X:%02X:%02X.%X", id.domain, id.bus, id.device,
                id.function);
  return t(CUDA_SUCCESS);
}

SOFTCUDA_API CUresult cuDeviceGetUuid_v2(CUuuid* uuid, CUdevice dev) {
  Trace t("cuDeviceGetUuid_v2", "dev=%d", dev);
  REQUIRE_INIT(t);
  if (uuid == nullptr) return t(CUDA_ERROR_INVALID_VALUE);
  if (!valid_device(dev)) return t(CUDA_ERROR_INVALID_DEVICE);
  static const char kPrefix[12] = {'s', 'o', 'f', 't', 'c', 'u', 'd', 'a', '-', 'g', 'p', 'u'};
  std::memcpy(uuid->bytes, kPrefix, sizeof(kPrefix));
  uint32_t d = static_cast<uint32_t>(dev);
  std::memcpy(uuid->bytes + 12, &d, sizeof(d));
  return t(CUDA_SUCCESS);
}

SOFTCUDA_API CUresult cuDeviceGetUuid(CUuuid* uuid, CUdevice dev) {
  return cuDeviceGetUuid_v2(uuid, dev);
}

SOFTCUDA_API CUresult cuDeviceTotalMem_v2(size_t* bytes, CUdevice dev) {
  Trace t("cuDeviceTotalMem_v2", "dev=%d", dev);
  REQUIRE_INIT(t);
  if (bytes == nullptr) return t(CUDA_ERROR_INVALID_VALUE);
  if (!valid_device(dev)) return t(CUDA_ERROR_INVALID_DEVICE);
  *bytes = size_t{80} << 30;
  return t(CUDA_SUCCESS);
}

SOFTCUDA_API CUresult cuDeviceTotalMem(size_t* bytes, CUdevice dev) {
  return cuDeviceTotalMem_v2(bytes, dev);
}

SOFTCUDA_API CUresult cuDeviceGetAttribute(int* value, CUdevice_attribute attrib, CUdevice dev) {
  Trace t("cuDeviceGetAttribute", "attrib=%d, dev=%d", static_cast<int>(attrib), dev);
  REQUIRE_INIT(t);
  if (value == nullptr) return t(CUDA_ERROR_INVALID_VALUE);
  if (!valid_device(dev)) return t(CUDA_ERROR_INVALID_DEVICE);
  const bool gdr = gdr_supported();
  int v = 0;
  switch (attrib) {
    case CU_DEVICE_ATTRIBUTE_PCI_BUS_ID:
      v = static_cast<int>(pci_id(dev).bus);
      break;
    case CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID:
      v = static_cast<int>(pci_id(dev).device);
      break;
    case CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID:
      v = static_cast<int>(pci_id(dev).domain);
      break;
    case CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_SUPPORTED:
      v = gdr ? 1 : 0;
      break;
    case CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_FLUSH_WRITES_OPTIONS:
      v = gdr ? CU_FLUSH_GPU_DIRECT_RDMA_WRITES_OPTION_HOST : 0;
      break;
    case CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WRITES_ORDERING:
      v = static_cast<int>(
          env_long("SOFTCUDA_RDMA_ORDERING", CU_GPU_DIRECT_RDMA_WRITES_ORDERING_NONE));
      break;
    case CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED:
      v = dmabuf_supported() ? 1 : 0;
      break;
    default: {
      const AttributeValue* fixed = fixed_attribute(attrib);
      if (fixed == nullptr) return t(CUDA_ERROR_INVALID_VALUE);
      v = fixed->value;
    }
  }
  *value = v;
  return t(CUDA_SUCCESS);
}

SOFTCUDA_API CUresult cuDeviceCanAccessPeer(int* can_access, CUdevice dev, CUdevice peer) {
  Trace t("cuDeviceCanAccessPeer", "dev=%d, peer=%d", dev, peer);
  REQUIRE_INIT(t);
  if (can_access == nullptr) return t(CUDA_ERROR_INVALID_VALUE);
  if (!valid_device(dev) || !valid_device(peer)) return t(CUDA_ERROR_INVALID_DEVICE);
  *can_access = (dev != peer && env_flag("SOFTCUDA_P2P", true)) ? 1 : 0;
  return t(CUDA_SUCCESS);
}

// =============================================================== contexts ===
SOFTCUDA_API CUresult cuDevicePrimaryCtxRetain(CUcontext* ctx, CUdevice dev) {
  Trace t("cuDevicePrimaryCtxRetain", "dev=%d", dev);
  REQUIRE_INIT(t);
  if (ctx == nullptr) return t(CUDA_ERROR_INVALID_VALUE);
  if (!valid_device(dev)) return t(CUDA_ERROR_INVALID_DEVICE);
  g_ctx[dev].retains.fetch_add(1);
  *ctx = &g_ctx[dev];
  return t(CUDA_SUCCESS);
}

SOFTCUDA_API CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev) {
  Trace t("cuDevicePrimaryCtxRelease_v2", "dev=%d", dev);
  REQUIRE_INIT(t);
  if (!valid_device(dev)) return t(CUDA_ERROR_INVALID_DEVICE);
  int n = g_ctx[dev].retains.load();
  do {
    if (n <= 0) return t(CUDA_ERROR_INVALID_CONTEXT);
  } while (!g_ctx[dev].retains.compare_exchange_weak(n, n - 1));
  return t(CUDA_SUCCESS);
}

SOFTCUDA_API CUresult cuDevicePrimaryCtxRelease(CUdevice dev) {
  return cuDevicePrimaryCtxRelease_v2(dev);
}

SOFTCUDA_API CUresult cuDevicePrimaryCtxGetState(CUdevice dev, unsigned int* flags, int* active) {
  Trace t("cuDevicePrimaryCtxGetState", "dev=%d", dev);
  REQUIRE_INIT(t);
  if (flags == nullptr || active == nullptr) return t(CUDA_ERROR_INVALID_VALUE);
  if (!valid_device(dev)) return t(CUDA_ERROR_INVALID_DEVICE);
  *flags = 0;
  *active = g_ctx[dev].retains.load() > 0 ? 1 : 0;
  return t(CUDA_SUCCESS);
}

SOFTCUDA_API CUresult cuCtxGetCurrent(CUcontext* ctx) {
  Trace t("cuCtxGetCurrent");
  REQUIRE_INIT(t);
  if (ctx == nullptr) return t(CUDA_ERROR_INVALID_VALUE);
  *ctx = current_ctx();
  return t(CUDA_SUCCESS);
}

SOFTCUDA_API CUresult cuCtxSetCurrent(CUcontext ctx) {
  Trace t("cuCtxSetCurrent", "ctx=%p", static_cast<void*>(ctx));
  REQUIRE_INIT(t);
  if (ctx == nullptr) {
    if (!t_ctx_stack.empty()) t_ctx_stack.pop_back();
    return t(CUDA_SUCCESS);
  }
  if (!valid_ctx(ctx)) return t(CUDA_ERROR_INVALID_CONTEXT);
  if (t_ctx_stack.empty()) {
    t_ctx_stack.push_back(ctx);
  } else {
    t_ctx_stack.back() = ctx;
  }
  return t(CUDA_SUCCESS);
}

SOFTCUDA_API CUresult cuCtxPushCurrent_v2(CUcontext ctx) {
  Trace t("cuCtxPushCurrent_v2", "ctx=%p", static_cast<void*>(ctx));
  REQUIRE_INIT(t);
  if (ctx == nullptr || !valid_ctx(ctx)) return t(CUDA_ERROR_INVALID_CONTEXT);
  t_ctx_stack.push_back(ctx);
  return t(CUDA_SUCCESS);
}

SOFTCUDA_API CUresult cuCtxPushCurrent(CUcontext ctx) {
  return cuCtxPushCurrent_v2(ctx);
}

SOFTCUDA_API CUresult cuCtxPopCurrent_v2(CUcontext* ctx) {
  Trace t("cuCtxPopCurrent_v2");
  REQUIRE_INIT(t);
  if (t_ctx_stack.empty()) return t(CUDA_ERROR_INVALID_CONTEXT);
  if (ctx != nullptr) *ctx = t_ctx_stack.back();
  t_ctx_stack.pop_back();
  return t(CUDA_SUCCESS);
}

SOFTCUDA_API CUresult cuCtxPopCurrent(CUcontext* ctx) {
  return cuCtxPopCurrent_v2(ctx);
}

SOFTCUDA_API CUresult cuCtxGetDevice(CUdevice* device) {
  Trace t("cuCtxGetDevice");
  REQUIRE_INIT(t);
  if (device == nullptr) return t(CUDA_ERROR_INVALID_VALUE);
  int dev = 0;
  CUresult r = current_device(&dev);
  if (r != CUDA_SUCCESS) return t(r);
  *device = dev;
  return t(CUDA_SUCCESS);
}

SOFTCUDA_API CUresult cuCtxSynchronize(void) {
  Trace t("cuCtxSynchronize");
  REQUIRE_INIT(t);
  int dev = 0;
  return t(current_device(&dev));
}

// ================================================================= memory ===
SOFTCUDA_API CUresult cuMemAlloc_v2(CUdeviceptr* dptr, size_t bytesize) {
  Trace t("cuMemAlloc_v2", "bytesize=%zu", bytesize);
  REQUIRE_INIT(t);
  if (dptr == nullptr || bytesize == 0) return t(CUDA_ERROR_INVALID_VALUE);
  int dev = 0;
  CUresult r = current_device(&dev);
  if (r != CUDA_SUCCESS) return t(r);

  Range range;
  range.kind = Kind::Device;
  range.size = bytesize;
  range.mapped = round_up_pages(bytesize);
  range.device = dev;
  range.buffer_id = g_next_buffer_id.fetch_add(1);
  char name[64];
  std::snprintf(name, sizeof(name), "softcuda-dev%d-buf%llu", dev, range.buffer_id);
  range.fd = memfd_create(name, MFD_CLOEXEC);
  if (range.fd < 0) return t(CUDA_ERROR_OUT_OF_MEMORY);
  if (ftruncate(range.fd, static_cast<off_t>(range.mapped)) != 0) {
    close(range.fd);
    return t(CUDA_ERROR_OUT_OF_MEMORY);
  }
  if (map_fd(range.fd, range.mapped, &range.base, &range.shadow) != CUDA_SUCCESS) {
    close(range.fd);
    return t(CUDA_ERROR_OUT_OF_MEMORY);
  }
  {
    std::lock_guard<std::mutex> lock(g_mu);
    g_ranges[range.base] = range;
  }
  g_total_allocations.fetch_add(1);
  *dptr = range.base;
  if (env_flag("SOFTCUDA_LOG", false)) {
    std::fprintf(stderr, "softcuda:   -> dptr=0x%llx (fd %d, buffer id %llu)\n",
                 static_cast<unsigned long long>(range.base), range.fd, range.buffer_id);
  }
  return t(CUDA_SUCCESS);
}

SOFTCUDA_API CUresult cuMemAlloc(CUdeviceptr* dptr, size_t bytesize) {
  return cuMemAlloc_v2(dptr, bytesize);
}

SOFTCUDA_API CUresult cuMemFree_v2(CUdeviceptr dptr) {
  Trace t("cuMemFree_v2", "dptr=0x%llx", dptr);
  REQUIRE_INIT(t);
  Range victim;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    auto it = g_ranges.find(dptr);
    if (it == g_ranges.end() || it->second.kind != Kind::Device) return t(CUDA_ERROR_INVALID_VALUE);
    victim = it->second;
    g_ranges.erase(it);
  }
  unmap_range(victim);
  return t(CUDA_SUCCESS);
}

SOFTCUDA_API CUresult cuMemFree(CUdeviceptr dptr) {
  return cuMemFree_v2(dptr);
}

SOFTCUDA_API CUresult cuMemGetAddressRange_v2(CUdeviceptr* pbase, size_t* psize, CUdeviceptr dptr) {
  Trace t("cuMemGetAddressRange_v2", "dptr=0x%llx", dptr);
  REQUIRE_INIT(t);
  std::lock_guard<std::mutex> lock(g_mu);
  const Range* r = find_range(dptr);
  if (r == nullptr || !r->is_device()) return t(CUDA_ERROR_NOT_FOUND);
  if (pbase != nullptr) *pbase = r->base;
  if (psize != nullptr) *psize = r->size;
  return t(CUDA_SUCCESS);
}

SOFTCUDA_API CUresult cuMemGetAddressRange(CUdeviceptr* pbase, size_t* psize, CUdeviceptr dptr) {
  return cuMemGetAddressRange_v2(pbase, psize, dptr);
}

SOFTCUDA_API CUresult cuMemGetInfo_v2(size_t* free_bytes, size_t* total_bytes) {
  Trace t("cuMemGetInfo_v2");
  REQUIRE_INIT(t);
  int dev = 0;
  CUresult r = current_device(&dev);
  if (r != CUDA_SUCCESS) return t(r);
  if (free_bytes == nullptr || total_bytes == nullptr) return t(CUDA_ERROR_INVALID_VALUE);
  size_t used = 0;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    for (const auto& [base, range] : g_ranges) {
      if (range.kind == Kind::Device && range.device == dev) used += range.mapped;
    }
  }
  *total_bytes = size_t{80} << 30;
  *free_bytes = *total_bytes > used ? *total_bytes - used : 0;
  return t(CUDA_SUCCESS);
}

SOFTCUDA_API CUresult cuMemGetInfo(size_t* free_bytes, size_t* total_bytes) {
  return cuMemGetInfo_v2(free_bytes, total_bytes);
}

SOFTCUDA_API CUresult cuMemcpy(CUdeviceptr dst, CUdeviceptr src, size_t n) {
  Trace t("cuMemcpy", "dst=0x%llx, src=0x%llx, n=%zu", dst, src, n);
  return t(do_copy(dst, Side::Any, src, Side::Any, n));
}

SOFTCUDA_API CUresult cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream stream) {
  Trace t("cuMemcpyAsync", "dst=0x%llx, src=0x%llx, n=%zu, stream=%p", dst, src, n,
          static_cast<void*>(stream));
  if (!valid_stream(stream)) return t(CUDA_ERROR_INVALID_HANDLE);
  return t(do_copy(dst, Side::Any, src, Side::Any, n));
}

SOFTCUDA_API CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void* src, size_t n) {
  Trace t("cuMemcpyHtoD_v2", "dst=0x%llx, src=%p, n=%zu", dst, src, n);
  return t(do_copy(dst, Side::Device, reinterpret_cast<uintptr_t>(src), Side::Host, n));
}

SOFTCUDA_API CUresult cuMemcpyHtoD(CUdeviceptr dst, const void* src, size_t n) {
  return cuMemcpyHtoD_v2(dst, src, n);
}

SOFTCUDA_API CUresult cuMemcpyDtoH_v2(void* dst, CUdeviceptr src, size_t n) {
  Trace t("cuMemcpyDtoH_v2", "dst=%p, src=0x%llx, n=%zu", dst, src, n);
  return t(do_copy(reinterpret_cast<uintptr_t>(dst), Side::Host, src, Side::Device, n));
}

SOFTCUDA_API CUresult cuMemcpyDtoH(void* dst, CUdeviceptr src, size_t n) {
  return cuMemcpyDtoH_v2(dst, src, n);
}

SOFTCUDA_API CUresult cuMemcpyDtoD_v2(CUdeviceptr dst, CUdeviceptr src, size_t n) {
  Trace t("cuMemcpyDtoD_v2", "dst=0x%llx, src=0x%llx, n=%zu", dst, src, n);
  return t(do_copy(dst, Side::Device, src, Side::Device, n));
}

SOFTCUDA_API CUresult cuMemcpyDtoD(CUdeviceptr dst, CUdeviceptr src, size_t n) {
  return cuMemcpyDtoD_v2(dst, src, n);
}

SOFTCUDA_API CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void* src, size_t n,
                                           CUstream stream) {
  Trace t("cuMemcpyHtoDAsync_v2", "dst=0x%llx, src=%p, n=%zu", dst, src, n);
  if (!valid_stream(stream)) return t(CUDA_ERROR_INVALID_HANDLE);
  return t(do_copy(dst, Side::Device, reinterpret_cast<uintptr_t>(src), Side::Host, n));
}

SOFTCUDA_API CUresult cuMemcpyHtoDAsync(CUdeviceptr dst, const void* src, size_t n,
                                        CUstream stream) {
  return cuMemcpyHtoDAsync_v2(dst, src, n, stream);
}

SOFTCUDA_API CUresult cuMemcpyDtoHAsync_v2(void* dst, CUdeviceptr src, size_t n, CUstream stream) {
  Trace t("cuMemcpyDtoHAsync_v2", "dst=%p, src=0x%llx, n=%zu", dst, src, n);
  if (!valid_stream(stream)) return t(CUDA_ERROR_INVALID_HANDLE);
  return t(do_copy(reinterpret_cast<uintptr_t>(dst), Side::Host, src, Side::Device, n));
}

SOFTCUDA_API CUresult cuMemcpyDtoHAsync(void* dst, CUdeviceptr src, size_t n, CUstream stream) {
  return cuMemcpyDtoHAsync_v2(dst, src, n, stream);
}

SOFTCUDA_API CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr dst, CUdeviceptr src, size_t n,
                                           CUstream stream) {
  Trace t("cuMemcpyDtoDAsync_v2", "dst=0x%llx, src=0x%llx, n=%zu", dst, src, n);
  if (!valid_stream(stream)) return t(CUDA_ERROR_INVALID_HANDLE);
  return t(do_copy(dst, Side::Device, src, Side::Device, n));
}

SOFTCUDA_API CUresult cuMemcpyDtoDAsync(CUdeviceptr dst, CUdeviceptr src, size_t n,
                                        CUstream stream) {
  return cuMemcpyDtoDAsync_v2(dst, src, n, stream);
}

SOFTCUDA_API CUresult cuMemsetD8_v2(CUdeviceptr dst, unsigned char value, size_t n) {
  Trace t("cuMemsetD8_v2", "dst=0x%llx, value=%u, n=%zu", dst, value, n);
  REQUIRE_INIT(t);
  if (n == 0) return t(CUDA_SUCCESS);
  char* d = nullptr;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    CUresult r = resolve(dst, n, false, &d);
    if (r != CUDA_SUCCESS) return t(r);
  }
  std::memset(d, value, n);
  return t(CUDA_SUCCESS);
}

SOFTCUDA_API CUresult cuMemsetD8(CUdeviceptr dst, unsigned char value, size_t n) {
  return cuMemsetD8_v2(dst, value, n);
}

// ------------------------------------------------------------ host memory --
SOFTCUDA_API CUresult cuMemHostAlloc(void** pp, size_t bytesize, unsigned int flags) {
  Trace t("cuMemHostAlloc", "bytesize=%zu, flags=0x%x", bytesize, flags);
  REQUIRE_INIT(t);
  if (pp == nullptr || bytesize == 0 ||
      (flags & ~unsigned{CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP |
                         CU_MEMHOSTALLOC_WRITECOMBINED}) != 0) {
    return t(CUDA_ERROR_INVALID_VALUE);
  }
  int dev = 0;
  CUresult r = current_device(&dev);
  if (r != CUDA_SUCCESS) return t(r);
  Range range;
  range.kind = Kind::HostAlloc;
  range.size = bytesize;
  range.mapped = round_up_pages(bytesize);
  range.device = dev;
  range.buffer_id = g_next_buffer_id.fetch_add(1);
  void* p = mmap(nullptr, range.mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return t(CUDA_ERROR_OUT_OF_MEMORY);
  range.base = reinterpret_cast<uintptr_t>(p);
  range.shadow = static_cast<char*>(p);
  {
    std::lock_guard<std::mutex> lock(g_mu);
    g_ranges[range.base] = range;
  }
  *pp = p;
  return t(CUDA_SUCCESS);
}

SOFTCUDA_API CUresult cuMemAllocHost_v2(void** pp, size_t bytesize) {
  return cuMemHostAlloc(pp, bytesize, 0);
}

SOFTCUDA_API CUresult cuMemAllocHost(void** pp, size_t bytesize) {
  return cuMemHostAlloc(pp, bytesize, 0);
}

SOFTCUDA_API CUresult cuMemFreeHost(void* p) {
  Trace t("cuMemFreeHost", "p=%p", p);
  REQUIRE_INIT(t);
  Range victim;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    auto it = g_ranges.find(reinterpret_cast<uintptr_t>(p));
    if (it == g_ranges.end() || it->second.kind != Kind::HostAlloc)
      return t(CUDA_ERROR_INVALID_VALUE);
    victim = it->second;
    g_ranges.erase(it);
  }
  unmap_range(victim);
  return t(CUDA_SUCCESS);
}

SOFTCUDA_API CUresult cuMemHostRegister_v2(void* p, size_t bytesize, unsigned int flags) {
  Trace t("cuMemHostRegister_v2", "p=%p, bytesize=%zu, flags=0x%x", p, bytesize, flags);
  REQUIRE_INIT(t);
  if (p == nullptr || bytesize == 0 ||
      (flags & ~unsigned{CU_MEMHOSTREGISTER_PORTABLE | CU_MEMHOSTREGISTER_DEVICEMAP |
                         CU_MEMHOSTREGISTER_IOMEMORY | CU_MEMHOSTREGISTER_READ_ONLY}) != 0) {
    return t(CUDA_ERROR_INVALID_VALUE);
  }
  int dev = 0;
  CUresult r = current_device(&dev);
  if (r != CUDA_SUCCESS) return t(r);
  Range range;
  range.kind = Kind::HostRegistered;
  range.base = reinterpret_cast<uintptr_t>(p);
  range.size = bytesize;
  range.shadow = static_cast<char*>(p);
  range.device = dev;
  range.buffer_id = g_next_buffer_id.fetch_add(1);
  std::lock_guard<std::mutex> lock(g_mu);
  if (overlaps_any(range.base, bytesize)) return t(CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED);
  g_ranges[range.base] = range;
  return t(CUDA_SUCCESS);
}

SOFTCUDA_API CUresult cuMemHostRegister(void* p, size_t bytesize, unsigned int flags) {
  return cuMemHostRegister_v2(p, bytesize, flags);
}

SOFTCUDA_API CUresult cuMemHostUnregister(void* p) {
  Trace t("cuMemHostUnregister", "p=%p", p);
  REQUIRE_INIT(t);
  std::lock_guard<std::mutex> lock(g_mu);
  auto it = g_ranges.find(reinterpret_cast<uintptr_t>(p));
  if (it == g_ranges.end() || it->second.kind != Kind::HostRegistered) {
    return t(CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED);
  }
  g_ranges.erase(it);
  return t(CUDA_SUCCESS);
}

SOFTCUDA_API CUresult cuMemHostGetDevicePointer_v2(CUdeviceptr* pdptr, void* p,
                                                   unsigned int flags) {
  Trace t("cuMemHostGetDevicePointer_v2", "p=%p, flags=%u", p, flags);
  REQUIRE_INIT(t);
  if (pdptr == nullptr || flags != 0) return t(CUDA_ERROR_INVALID_VALUE);
  std::lock_guard<std::mutex> lock(g_mu);
  const Range* r = find_range(reinterpret_cast<uintptr_t>(p));
  if (r == nullptr || r->is_device()) return t(CUDA_ERROR_INVALID_VALUE);
  *pdptr = reinterpret_cast<uintptr_t>(p);
  return t(CUDA_SUCCESS);
}

SOFTCUDA_API CUresult cuMemHostGetDevicePointer(CUdeviceptr* pdptr, void* p, unsigned int flags) {
  return cuMemHostGetDevicePointer_v2(pdptr, p, flags);
}

// ------------------------------------------------------- pointer queries ---
SOFTCUDA_API CUresult cuPointerGetAttribute(void* data, CUpointer_attribute attribute,
                                            CUdeviceptr ptr) {
  Trace t("cuPointerGetAttribute", "attribute=%d, ptr=0x%llx", static_cast<int>(attribute), ptr);
  REQUIRE_INIT(t);
  if (data == nullptr) return t(CUDA_ERROR_INVALID_VALUE);
  std::lock_guard<std::mutex> lock(g_mu);
  return t(pointer_attribute(find_range(ptr), attribute, data, ptr));
}

SOFTCUDA_API CUresult cuPointerGetAttributes(unsigned int count, CUpointer_attribute* attributes,
                                             void** data, CUdeviceptr ptr) {
  Trace t("cuPointerGetAttributes", "count=%u, ptr=0x%llx", count, ptr);
  REQUIRE_INIT(t);
  if (count == 0 || attributes == nullptr || data == nullptr) return t(CUDA_ERROR_INVALID_VALUE);
  std::lock_guard<std::mutex> lock(g_mu);
  const Range* r = find_range(ptr);
  for (unsigned i = 0; i < count; ++i) {
    if (data[i] == nullptr) return t(CUDA_ERROR_INVALID_VALUE);
    CUresult res = r != nullptr ? pointer_attribute(r, attributes[i], data[i], ptr)
                                : default_attribute(attributes[i], data[i]);
    if (res == CUDA_ERROR_INVALID_VALUE && r != nullptr &&
        attributes[i] == CU_POINTER_ATTRIBUTE_HOST_POINTER) {
      *static_cast<void**>(data[i]) = nullptr;  // no host alias: NULL, not an error
      res = CUDA_SUCCESS;
    }
    if (res != CUDA_SUCCESS) return t(res);
  }
  return t(CUDA_SUCCESS);
}

SOFTCUDA_API CUresult cuPointerSetAttribute(const void* value, CUpointer_attribute attribute,
                                            CUdeviceptr ptr) {
  Trace t("cuPointerSetAttribute", "attribute=%d, ptr=0x%llx", static_cast<int>(attribute), ptr);
  REQUIRE_INIT(t);
  if (value == nullptr || attribute != CU_POINTER_ATTRIBUTE_SYNC_MEMOPS) {
    return t(CUDA_ERROR_INVALID_VALUE);
  }
  std::lock_guard<std::mutex> lock(g_mu);
  Range* r = find_range(ptr);
  if (r == nullptr || !r->is_device()) return t(CUDA_ERROR_INVALID_VALUE);
  r->sync_memops = *static_cast<const unsigned*>(value) != 0;
  return t(CUDA_SUCCESS);
}

// ------------------------------------------------------------- dma-buf -----
SOFTCUDA_API CUresult cuMemGetHandleForAddressRange(void* handle, CUdeviceptr dptr, size_t size,
                                                    CUmemRangeHandleType type,
                                                    unsigned long long flags) {
  Trace t("cuMemGetHandleForAddressRange", "dptr=0x%llx, size=%zu, type=%d, flags=0x%llx", dptr,
          size, static_cast<int>(type), flags);
  REQUIRE_INIT(t);
  if (handle == nullptr || type != CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD) {
    return t(CUDA_ERROR_INVALID_VALUE);
  }
  if (!dmabuf_supported()) return t(CUDA_ERROR_NOT_SUPPORTED);
  if (flags != 0 && flags != CU_MEM_RANGE_FLAG_DMA_BUF_MAPPING_TYPE_PCIE) {
    return t(CUDA_ERROR_INVALID_VALUE);
  }
  if (flags != 0 && !env_flag("SOFTCUDA_DMABUF_PCIE", true)) return t(CUDA_ERROR_NOT_SUPPORTED);
  // dptr and size must be aligned to the host page size.
  if (size == 0 || dptr % page_size() != 0 || size % page_size() != 0) {
    return t(CUDA_ERROR_INVALID_VALUE);
  }
  int fd = -1;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    const Range* r = find_range(dptr);
    // The whole range in one device allocation (its page-rounded mapping).
    if (r == nullptr || r->kind != Kind::Device || size > r->mapped - (dptr - r->base)) {
      return t(CUDA_ERROR_INVALID_VALUE);
    }
    fd = fcntl(r->fd, F_DUPFD_CLOEXEC, 0);
  }
  if (fd < 0) return t(CUDA_ERROR_OUT_OF_MEMORY);
  *static_cast<int*>(handle) = fd;
  g_dmabuf_exports.fetch_add(1);
  if (env_flag("SOFTCUDA_LOG", false)) std::fprintf(stderr, "softcuda:   -> dma-buf fd %d\n", fd);
  return t(CUDA_SUCCESS);
}

SOFTCUDA_API CUresult cuFlushGPUDirectRDMAWrites(CUflushGPUDirectRDMAWritesTarget target,
                                                 CUflushGPUDirectRDMAWritesScope scope) {
  Trace t("cuFlushGPUDirectRDMAWrites", "target=%d, scope=%d", static_cast<int>(target),
          static_cast<int>(scope));
  REQUIRE_INIT(t);
  int dev = 0;
  CUresult r = current_device(&dev);
  if (r != CUDA_SUCCESS) return t(r);
  if (target != CU_FLUSH_GPU_DIRECT_RDMA_WRITES_TARGET_CURRENT_CTX ||
      (scope != CU_FLUSH_GPU_DIRECT_RDMA_WRITES_TO_OWNER &&
       scope != CU_FLUSH_GPU_DIRECT_RDMA_WRITES_TO_ALL_DEVICES)) {
    return t(CUDA_ERROR_INVALID_VALUE);
  }
  if (!gdr_supported()) return t(CUDA_ERROR_NOT_SUPPORTED);
  g_flushes.fetch_add(1);
  return t(CUDA_SUCCESS);
}

// ------------------------------------------------------------------- IPC ---
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

// ------------------------------------------------------ streams and events --
SOFTCUDA_API CUresult cuStreamCreate(CUstream* stream, unsigned int flags) {
  Trace t("cuStreamCreate", "flags=%u", flags);
  REQUIRE_INIT(t);
  if (stream == nullptr || flags > 1) return t(CUDA_ERROR_INVALID_VALUE);
  int dev = 0;
  CUresult r = current_device(&dev);
  if (r != CUDA_SUCCESS) return t(r);
  auto* s = new CUstream_st{dev};
  std::lock_guard<std::mutex> lock(g_mu);
  g_streams.insert(s);
  *stream = s;
  return t(CUDA_SUCCESS);
}

SOFTCUDA_API CUresult cuStreamDestroy_v2(CUstream stream) {
  Trace t("cuStreamDestroy_v2", "stream=%p", static_cast<void*>(stream));
  REQUIRE_INIT(t);
  std::lock_guard<std::mutex> lock(g_mu);
  if (g_streams.erase(stream) == 0) return t(CUDA_ERROR_INVALID_HANDLE);
  delete stream;
  return t(CUDA_SUCCESS);
}

SOFTCUDA_API CUresult cuStreamDestroy(CUstream stream) {
  return cuStreamDestroy_v2(stream);
}

SOFTCUDA_API CUresult cuStreamSynchronize(CUstream stream) {
  Trace t("cuStreamSynchronize", "stream=%p", static_cast<void*>(stream));
  REQUIRE_INIT(t);
  return t(valid_stream(stream) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE);
}

SOFTCUDA_API CUresult cuStreamQuery(CUstream stream) {
  Trace t("cuStreamQuery", "stream=%p", static_cast<void*>(stream));
  REQUIRE_INIT(t);
  return t(valid_stream(stream) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE);
}

SOFTCUDA_API CUresult cuEventCreate(CUevent* event, unsigned int flags) {
  Trace t("cuEventCreate", "flags=%u", flags);
  REQUIRE_INIT(t);
  if (event == nullptr || flags > 0xf) return t(CUDA_ERROR_INVALID_VALUE);
  int dev = 0;
  CUresult r = current_device(&dev);
  if (r != CUDA_SUCCESS) return t(r);
  auto* e = new CUevent_st{dev};
  std::lock_guard<std::mutex> lock(g_mu);
  g_events.insert(e);
  *event = e;
  return t(CUDA_SUCCESS);
}

namespace {
bool valid_event(CUevent e) {
  std::lock_guard<std::mutex> lock(g_mu);
  return g_events.count(e) != 0;
}
}  // namespace

SOFTCUDA_API CUresult cuEventDestroy_v2(CUevent event) {
  Trace t("cuEventDestroy_v2", "event=%p", static_cast<void*>(event));
  REQUIRE_INIT(t);
  std::lock_guard<std::mutex> lock(g_mu);
  if (g_events.erase(event) == 0) return t(CUDA_ERROR_INVALID_HANDLE);
  delete event;
  return t(CUDA_SUCCESS);
}

SOFTCUDA_API CUresult cuEventDestroy(CUevent event) {
  return cuEventDestroy_v2(event);
}

SOFTCUDA_API CUresult cuEventRecord(CUevent event, CUstream stream) {
  Trace t("cuEventRecord", "event=%p, stream=%p", static_cast<void*>(event),
          static_cast<void*>(stream));
  REQUIRE_INIT(t);
  return t(valid_event(event) && valid_stream(stream) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE);
}

SOFTCUDA_API CUresult cuEventSynchronize(CUevent event) {
  Trace t("cuEventSynchronize", "event=%p", static_cast<void*>(event));
  REQUIRE_INIT(t);
  return t(valid_event(event) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE);
}

SOFTCUDA_API CUresult cuEventQuery(CUevent event) {
  Trace t("cuEventQuery", "event=%p", static_cast<void*>(event));
  REQUIRE_INIT(t);
  return t(valid_event(event) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE);
}

// ======================================================== cuGetProcAddress ===
SOFTCUDA_API CUresult cuGetProcAddress_v2(const char* symbol, void** pfn, int cuda_version,
                                          cuuint64_t flags, CUdriverProcAddressQueryResult* status);

namespace {
struct ProcEntry {
  const char* name;  // base name, as callers ask for it
  void* fn;          // the variant we resolve it to
  int since;         // the CUDA version that introduced that variant
};

template <typename F>
void* fn_ptr(F* f) {
  return reinterpret_cast<void*>(f);
}

const std::vector<ProcEntry>& proc_table() {
  static const std::vector<ProcEntry> table = {
      {"cuInit", fn_ptr(&cuInit), 2000},
      {"cuDriverGetVersion", fn_ptr(&cuDriverGetVersion), 2020},
      {"cuGetErrorString", fn_ptr(&cuGetErrorString), 6000},
      {"cuGetErrorName", fn_ptr(&cuGetErrorName), 6000},
      {"cuGetProcAddress", fn_ptr(&cuGetProcAddress_v2), 12000},
      {"cuDeviceGetCount", fn_ptr(&cuDeviceGetCount), 2000},
      {"cuDeviceGet", fn_ptr(&cuDeviceGet), 2000},
      {"cuDeviceGetName", fn_ptr(&cuDeviceGetName), 2000},
      {"cuDeviceGetPCIBusId", fn_ptr(&cuDeviceGetPCIBusId), 4010},
      {"cuDeviceGetUuid", fn_ptr(&cuDeviceGetUuid_v2), 11040},
      {"cuDeviceTotalMem", fn_ptr(&cuDeviceTotalMem_v2), 3020},
      {"cuDeviceGetAttribute", fn_ptr(&cuDeviceGetAttribute), 2000},
      {"cuDeviceCanAccessPeer", fn_ptr(&cuDeviceCanAccessPeer), 4000},
      {"cuDevicePrimaryCtxRetain", fn_ptr(&cuDevicePrimaryCtxRetain), 7000},
      {"cuDevicePrimaryCtxRelease", fn_ptr(&cuDevicePrimaryCtxRelease_v2), 11000},
      {"cuDevicePrimaryCtxGetState", fn_ptr(&cuDevicePrimaryCtxGetState), 7000},
      {"cuCtxGetCurrent", fn_ptr(&cuCtxGetCurrent), 4000},
      {"cuCtxSetCurrent", fn_ptr(&cuCtxSetCurrent), 4000},
      {"cuCtxPushCurrent", fn_ptr(&cuCtxPushCurrent_v2), 4000},
      {"cuCtxPopCurrent", fn_ptr(&cuCtxPopCurrent_v2), 4000},
      {"cuCtxGetDevice", fn_ptr(&cuCtxGetDevice), 2000},
      {"cuCtxSynchronize", fn_ptr(&cuCtxSynchronize), 2000},
      {"cuMemAlloc", fn_ptr(&cuMemAlloc_v2), 3020},
      {"cuMemFree", fn_ptr(&cuMemFree_v2), 3020},
      {"cuMemGetAddressRange", fn_ptr(&cuMemGetAddressRange_v2), 3020},
      {"cuMemGetInfo", fn_ptr(&cuMemGetInfo_v2), 3020},
      {"cuMemcpy", fn_ptr(&cuMemcpy), 4000},
      {"cuMemcpyAsync", fn_ptr(&cuMemcpyAsync), 4000},
      {"cuMemcpyHtoD", fn_ptr(&cuMemcpyHtoD_v2), 3020},
      {"cuMemcpyDtoH", fn_ptr(&cuMemcpyDtoH_v2), 3020},
      {"cuMemcpyDtoD", fn_ptr(&cuMemcpyDtoD_v2), 3020},
      {"cuMemcpyHtoDAsync", fn_ptr(&cuMemcpyHtoDAsync_v2), 3020},
      {"cuMemcpyDtoHAsync", fn_ptr(&cuMemcpyDtoHAsync_v2), 3020},
      {"cuMemcpyDtoDAsync", fn_ptr(&cuMemcpyDtoDAsync_v2), 3020},
      {"cuMemsetD8", fn_ptr(&cuMemsetD8_v2), 3020},
      {"cuMemAllocHost", fn_ptr(&cuMemAllocHost_v2), 3020},
      {"cuMemHostAlloc", fn_ptr(&cuMemHostAlloc), 2020},
      {"cuMemFreeHost", fn_ptr(&cuMemFreeHost), 2000},
      {"cuMemHostRegister", fn_ptr(&cuMemHostRegister_v2), 6050},
      {"cuMemHostUnregister", fn_ptr(&cuMemHostUnregister), 4000},
      {"cuMemHostGetDevicePointer", fn_ptr(&cuMemHostGetDevicePointer_v2), 3020},
      {"cuPointerGetAttribute", fn_ptr(&cuPointerGetAttribute), 4000},
      {"cuPointerGetAttributes", fn_ptr(&cuPointerGetAttributes), 7000},
      {"cuPointerSetAttribute", fn_ptr(&cuPointerSetAttribute), 6000},
      {"cuMemGetHandleForAddressRange", fn_ptr(&cuMemGetHandleForAddressRange), 11070},
      {"cuFlushGPUDirectRDMAWrites", fn_ptr(&cuFlushGPUDirectRDMAWrites), 11030},
      {"cuIpcGetMemHandle", fn_ptr(&cuIpcGetMemHandle), 4010},
      {"cuIpcOpenMemHandle", fn_ptr(&cuIpcOpenMemHandle_v2), 11000},
      {"cuIpcCloseMemHandle", fn_ptr(&cuIpcCloseMemHandle), 4010},
      {"cuStreamCreate", fn_ptr(&cuStreamCreate), 2000},
      {"cuStreamDestroy", fn_ptr(&cuStreamDestroy_v2), 4000},
      {"cuStreamSynchronize", fn_ptr(&cuStreamSynchronize), 2000},
      {"cuStreamQuery", fn_ptr(&cuStreamQuery), 2000},
      {"cuEventCreate", fn_ptr(&cuEventCreate), 2000},
      {"cuEventDestroy", fn_ptr(&cuEventDestroy_v2), 4000},
      {"cuEventRecord", fn_ptr(&cuEventRecord), 2000},
      {"cuEventSynchronize", fn_ptr(&cuEventSynchronize), 2000},
      {"cuEventQuery", fn_ptr(&cuEventQuery), 2000},
  };
  return table;
}

// Shared by both entry points: fills *pfn and *status, returns the CUresult the
// v2 (CUDA 12+) entry point reports.
CUresult lookup_proc(const char* symbol, void** pfn, int cuda_version, cuuint64_t flags,
                     CUdriverProcAddressQueryResult* status) {
  constexpr cuuint64_t kKnownFlags =
      CU_GET_PROC_ADDRESS_LEGACY_STREAM | CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM;
  if (symbol == nullptr || pfn == nullptr || (flags & ~kKnownFlags) != 0 ||
      cuda_version > driver_version()) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  *pfn = nullptr;
  *status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  for (const ProcEntry& e : proc_table()) {
    if (std::strcmp(e.name, symbol) != 0) continue;
    if (cuda_version < e.since) {
      *status = CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT;
    } else {
      *pfn = e.fn;
      *status = CU_GET_PROC_ADDRESS_SUCCESS;
    }
    break;
  }
  return CUDA_SUCCESS;
}
}  // namespace

// CUDA 12+: "not found" is CUDA_SUCCESS with *pfn = NULL and the reason in
// *symbolStatus (as documented in the CUDA 13.0 cuda.h).
SOFTCUDA_API CUresult cuGetProcAddress_v2(const char* symbol, void** pfn, int cuda_version,
                                          cuuint64_t flags,
                                          CUdriverProcAddressQueryResult* status) {
  Trace t("cuGetProcAddress_v2", "symbol=%s, cudaVersion=%d, flags=%llu",
          symbol != nullptr ? symbol : "(null)", cuda_version,
          static_cast<unsigned long long>(flags));
  CUdriverProcAddressQueryResult local = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  CUresult r = lookup_proc(symbol, pfn, cuda_version, flags, &local);
  if (status != nullptr) *status = local;
  return t(r);
}

// The CUDA 11.3 signature, without a status: an unknown symbol is
// CUDA_ERROR_NOT_FOUND.
SOFTCUDA_API CUresult cuGetProcAddress(const char* symbol, void** pfn, int cuda_version,
                                       cuuint64_t flags) {
  Trace t("cuGetProcAddress", "symbol=%s, cudaVersion=%d, flags=%llu",
          symbol != nullptr ? symbol : "(null)", cuda_version,
          static_cast<unsigned long long>(flags));
  CUdriverProcAddressQueryResult status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  CUresult r = lookup_proc(symbol, pfn, cuda_version, flags, &status);
  if (r != CUDA_SUCCESS) return t(r);
  return t(status == CU_GET_PROC_ADDRESS_SUCCESS ? CUDA_SUCCESS : CUDA_ERROR_NOT_FOUND);
}

// ============================================================ test controls ===
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
