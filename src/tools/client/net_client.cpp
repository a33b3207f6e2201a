// NetClient: one v12-shaped API over whichever ncclNetPlugin_vN a library
// exports. Every call is dispatched on the loaded version through a generic
// lambda; the per-version differences are spelled out with `if constexpr`.
#include "weft_client/net_client.h"

#include <dlfcn.h>
#include <link.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <climits>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <tuple>
#include <type_traits>

namespace weft {
namespace {

constexpr int kMinAbi = 6;
constexpr int kMaxAbi = 12;
// Grouped receives are small in practice (NCCL: maxRecvs <= 8); 64 leaves
// headroom while keeping the int conversion buffer on the stack.
constexpr int kMaxGroupedRecvs = 64;

template <class T>
constexpr int abi_of = 0;
template <>
constexpr int abi_of<ncclNet_v6_t> = 6;
template <>
constexpr int abi_of<ncclNet_v7_t> = 7;
template <>
constexpr int abi_of<ncclNet_v8_t> = 8;
template <>
constexpr int abi_of<ncclNet_v9_t> = 9;
template <>
constexpr int abi_of<ncclNet_v10_t> = 10;
template <>
constexpr int abi_of<ncclNet_v11_t> = 11;
template <>
constexpr int abi_of<ncclNet_v12_t> = 12;

// Calls f(const ncclNet_vN_t*) with the table cast to the loaded version.
template <class F>
ncclResult_t visit(int version, const void* table, F&& f) {
  switch (version) {
    case 6:
      return f(static_cast<const ncclNet_v6_t*>(table));
    case 7:
      return f(static_cast<const ncclNet_v7_t*>(table));
    case 8:
      return f(static_cast<const ncclNet_v8_t*>(table));
    case 9:
      return f(static_cast<const ncclNet_v9_t*>(table));
    case 10:
      return f(static_cast<const ncclNet_v10_t*>(table));
    case 11:
      return f(static_cast<const ncclNet_v11_t*>(table));
    case 12:
      return f(static_cast<const ncclNet_v12_t*>(table));
    default:
      return ncclInternalError;
  }
}

std::string symbol_name(int version) {
  return "ncclNetPlugin_v" + std::to_string(version);
}

// Under AddressSanitizer the plugin stays mapped after dlclose: LeakSanitizer
// reports at exit, and frames of an unloaded library print as "<unknown
// module>", which no suppression can name.
#if defined(__SANITIZE_ADDRESS__)
constexpr int kKeepLoaded = RTLD_NODELETE;
#else
constexpr int kKeepLoaded = 0;
#endif

// Closes a dlopen handle unless released: keeps load() leak-free on errors.
struct LibGuard {
  void* lib;
  ~LibGuard() {
    if (lib != nullptr) dlclose(lib);
  }
  void* release() {
    void* l = lib;
    lib = nullptr;
    return l;
  }
};

// Used when the caller gives no logger: plugins may call it unconditionally.
// Prints warnings always, everything else when NCCL_DEBUG asks for it.
int stderr_log_threshold() {
  static const int threshold = [] {
    const char* env = getenv("NCCL_DEBUG");
    if (env == nullptr) return static_cast<int>(NCCL_LOG_WARN);
    if (strcasecmp(env, "INFO") == 0) return static_cast<int>(NCCL_LOG_INFO);
    if (strcasecmp(env, "TRACE") == 0) return static_cast<int>(NCCL_LOG_TRACE);
    if (strcasecmp(env, "VERSION") == 0) return static_cast<int>(NCCL_LOG_VERSION);
    return static_cast<int>(NCCL_LOG_WARN);
  }();
  return threshold;
}

void stderr_logger(ncclDebugLogLevel level, unsigned long /*flags*/, const char* file, int line,
                   const char* fmt, ...) {
  if (level == NCCL_LOG_NONE || static_cast<int>(level) > stderr_log_threshold()) return;
  // ABORT ranks above INFO numerically but must always be shown.
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  const char* tag = level == NCCL_LOG_WARN ? "WARN" : level == NCCL_LOG_INFO ? "INFO" : "TRACE";
  fprintf(stderr, "[%d] plugin %s %s:%d %s\n", static_cast<int>(getpid()), tag,
          file != nullptr ? file : "?", line, msg);
}

uint64_t make_comm_id() {
  static std::atomic<uint64_t> counter{0};
  auto now = static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
  return (static_cast<uint64_t>(getpid()) << 32) ^ now ^ (counter.fetch_add(1) << 48);
}

bool fits_int(size_t size) {
  return size <= static_cast<size_t>(INT_MAX);
}

}  // namespace

const char* nccl_result_name(ncclResult_t r) {
  switch (r) {
    case ncclSuccess:
      return "ncclSuccess";
    case ncclUnhandledCudaError:
      return "ncclUnhandledCudaError";
    case ncclSystemError:
      return "ncclSystemError";
    case ncclInternalError:
      return "ncclInternalError";
    case ncclInvalidArgument:
      return "ncclInvalidArgument";
    case ncclInvalidUsage:
      return "ncclInvalidUsage";
    case ncclRemoteError:
      return "ncclRemoteError";
    case ncclInProgress:
      return "ncclInProgress";
    default:
      return "ncclResult(unknown)";
  }
}

std::unique_ptr<NetClient> NetClient::load(const std::string& path, int abi_version,
                                           std::string& error) {
  if (abi_version != 0 && (abi_version < kMinAbi || abi_version > kMaxAbi)) {
    error = "unsupported ncclNet ABI version " + std::to_string(abi_version) +
            " (supported: " + std::to_string(kMinAbi) + ".." + std::to_string(kMaxAbi) + ")";
    return nullptr;
  }
  dlerror();
  LibGuard guard{dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL | kKeepLoaded)};
  if (guard.lib == nullptr) {
    const char* msg = dlerror();
    error = "cannot load " + path + ": " + (msg != nullptr ? msg : "unknown dlopen error");
    return nullptr;
  }
  int first = abi_version != 0 ? abi_version : kMaxAbi;
  int last = abi_version != 0 ? abi_version : kMinAbi;
  for (int v = first; v >= last; --v) {
    void* sym = dlsym(guard.lib, symbol_name(v).c_str());
    if (sym == nullptr) continue;
    std::unique_ptr<NetClient> client(new NetClient());
    client->lib_ = guard.release();
    client->table_ = sym;
    client->version_ = v;
    return client;
  }
  if (abi_version != 0) {
    error = path + " does not export " + symbol_name(abi_version);
  } else {
    error = path + " exports none of ncclNetPlugin_v" + std::to_string(kMaxAbi) + " .. _v" +
            std::to_string(kMinAbi);
  }
  return nullptr;
}

NetClient::~NetClient() {
  if (initialized_) finalize();
  if (lib_ != nullptr) dlclose(lib_);
}

const char* NetClient::plugin_name() const {
  const char* name = nullptr;
  visit(version_, table_, [&](auto* t) {
    name = t->name;
    return ncclSuccess;
  });
  return name != nullptr ? name : "(null)";
}

ncclResult_t NetClient::init(ncclDebugLogger_t logger, ncclProfilerCallback_t profiler) {
  if (initialized_) return ncclInvalidUsage;
  if (logger == nullptr) logger = stderr_logger;
  ncclResult_t res = visit(version_, table_, [&](auto* t) {
    using T = std::remove_cvref_t<decltype(*t)>;
    if constexpr (abi_of<T> >= 11) {
      // The plugin may keep the config pointer: it lives as long as we do.
      return t->init(&ctx_, make_comm_id(), &config_, logger, profiler);
    } else if constexpr (abi_of<T> == 10) {
      return t->init(logger, profiler);
    } else {
      return t->init(logger);
    }
  });
  if (res == ncclSuccess) initialized_ = true;
  return res;
}

ncclResult_t NetClient::finalize() {
  if (!initialized_) return ncclSuccess;
  initialized_ = false;
  return visit(version_, table_, [&](auto* t) -> ncclResult_t {
    using T = std::remove_cvref_t<decltype(*t)>;
    if constexpr (abi_of<T> >= 11) {
      ncclResult_t r = t->finalize(ctx_);
      ctx_ = nullptr;
      return r;
    } else {
      return ncclSuccess;  // per-process init has no matching finalize
    }
  });
}

// The parameter types of a function pointer.
template <typename F>
struct FunctionArgs;
template <typename R, typename... A>
struct FunctionArgs<R (*)(A...)> {
  using type = std::tuple<A...>;
};

ncclResult_t NetClient::devices(int* ndev) {
  return visit(version_, table_, [&](auto* t) { return t->devices(ndev); });
}

ncclResult_t NetClient::properties(int dev, NetDeviceInfo* info) {
  if (info == nullptr) return ncclInvalidArgument;
  return visit(version_, table_, [&](auto* t) {
    // Deduce the properties struct from getProperties' second parameter.
    auto call = [&]<class P>(ncclResult_t (*fn)(int, P*)) {
      P props;
      memset(&props, 0, sizeof(props));
      ncclResult_t r = fn(dev, &props);
      if (r != ncclSuccess) return r;
      *info = NetDeviceInfo{};
      info->name = props.name != nullptr ? props.name : "";
      info->pci_path = props.pciPath != nullptr ? props.pciPath : "";
      info->guid = props.guid;
      info->ptr_support = props.ptrSupport;
      info->speed_mbps = props.speed;
      info->port = props.port;
      info->latency_us = props.latency;
      info->max_comms = props.maxComms;
      info->max_recvs = props.maxRecvs;
      info->max_p2p_bytes = static_cast<size_t>(INT32_MAX);
      if constexpr (requires { props.regIsGlobal; }) info->reg_is_global = props.regIsGlobal;
      if constexpr (requires { props.forceFlush; }) info->force_flush = props.forceFlush;
      if constexpr (requires { props.maxP2pBytes; }) info->max_p2p_bytes = props.maxP2pBytes;
      if constexpr (requires { props.vProps; }) {
        for (int i = 0; i < props.vProps.ndevs && i < 8; ++i) {
          info->vdevs.push_back(props.vProps.devs[i]);
        }
      }
      if constexpr (requires { props.railId; }) {
        info->rail_id = props.railId;
        info->plane_id = props.planeId;
      }
      return ncclSuccess;
    };
    return call(t->getProperties);
  });
}

ncclResult_t NetClient::make_vdevice(const std::vector<int>& devs, int* dev) {
  return visit(version_, table_, [&](auto* t) -> ncclResult_t {
    using T = std::remove_cvref_t<decltype(*t)>;
    if constexpr (abi_of<T> >= 9) {
      if (t->makeVDevice == nullptr) return ncclInvalidUsage;
      using Props = std::remove_pointer_t<
          std::tuple_element_t<1, typename FunctionArgs<decltype(t->makeVDevice)>::type>>;
      Props props;
      memset(&props, 0, sizeof(props));
      constexpr size_t kMax = sizeof(props.devs) / sizeof(props.devs[0]);
      if (devs.size() > kMax) return ncclInvalidArgument;
      props.ndevs = static_cast<int>(devs.size());
      for (size_t i = 0; i < devs.size(); ++i) props.devs[i] = devs[i];
      return t->makeVDevice(dev, &props);
    } else {
      return ncclInvalidUsage;
    }
  });
}

ncclResult_t NetClient::listen(int dev, void* handle, void** listen_comm) {
  return visit(version_, table_, [&](auto* t) {
    using T = std::remove_cvref_t<decltype(*t)>;
    if constexpr (abi_of<T> >= 11) {
      return t->listen(ctx_, dev, handle, listen_comm);
    } else {
      return t->listen(dev, handle, listen_comm);
    }
  });
}

ncclResult_t NetClient::connect(int dev, void* handle, void** send_comm) {
  return visit(version_, table_, [&](auto* t) {
    using T = std::remove_cvref_t<decltype(*t)>;
    ncclNetDeviceHandle_v7_t* dev_handle = nullptr;
    if constexpr (abi_of<T> >= 11) {
      return t->connect(ctx_, dev, handle, send_comm, &dev_handle);
    } else if constexpr (abi_of<T> == 10) {
      return t->connect(dev, &config_, handle, send_comm, &dev_handle);
    } else if constexpr (abi_of<T> >= 7) {
      return t->connect(dev, handle, send_comm, &dev_handle);
    } else {
      (void)dev_handle;
      return t->connect(dev, handle, send_comm);
    }
  });
}

ncclResult_t NetClient::accept(void* listen_comm, void** recv_comm) {
  return visit(version_, table_, [&](auto* t) {
    using T = std::remove_cvref_t<decltype(*t)>;
    ncclNetDeviceHandle_v7_t* dev_handle = nullptr;
    if constexpr (abi_of<T> >= 7) {
      return t->accept(listen_comm, recv_comm, &dev_handle);
    } else {
      (void)dev_handle;
      return t->accept(listen_comm, recv_comm);
    }
  });
}

ncclResult_t NetClient::reg_mr(void* comm, void* data, size_t size, int type, void** mhandle) {
  return visit(version_, table_, [&](auto* t) {
    using T = std::remove_cvref_t<decltype(*t)>;
    if constexpr (abi_of<T> <= 7) {
      if (!fits_int(size)) return ncclInvalidArgument;
      return t->regMr(comm, data, static_cast<int>(size), type, mhandle);
    } else {
      return t->regMr(comm, data, size, type, mhandle);
    }
  });
}

ncclResult_t NetClient::dereg_mr(void* comm, void* mhandle) {
  return visit(version_, table_, [&](auto* t) { return t->deregMr(comm, mhandle); });
}

ncclResult_t NetClient::isend(void* send_comm, void* data, size_t size, int tag, void* mhandle,
                              void** request, void* phandle) {
  return visit(version_, table_, [&](auto* t) {
    using T = std::remove_cvref_t<decltype(*t)>;
    if constexpr (abi_of<T> >= 10) {
      return t->isend(send_comm, data, size, tag, mhandle, phandle, request);
    } else if constexpr (abi_of<T> == 9) {
      return t->isend(send_comm, data, size, tag, mhandle, request);
    } else {
      if (!fits_int(size)) return ncclInvalidArgument;
      return t->isend(send_comm, data, static_cast<int>(size), tag, mhandle, request);
    }
  });
}

ncclResult_t NetClient::irecv(void* recv_comm, int n, void** data, size_t* sizes, int* tags,
                              void** mhandles, void** request, void** phandles) {
  return visit(version_, table_, [&](auto* t) {
    using T = std::remove_cvref_t<decltype(*t)>;
    if constexpr (abi_of<T> >= 10) {
      return t->irecv(recv_comm, n, data, sizes, tags, mhandles, phandles, request);
    } else if constexpr (abi_of<T> == 9) {
      return t->irecv(recv_comm, n, data, sizes, tags, mhandles, request);
    } else {
      if (n < 0 || n > kMaxGroupedRecvs) return ncclInvalidArgument;
      int int_sizes[kMaxGroupedRecvs];
      for (int i = 0; i < n; ++i) {
        if (!fits_int(sizes[i])) return ncclInvalidArgument;
        int_sizes[i] = static_cast<int>(sizes[i]);
      }
      return t->irecv(recv_comm, n, data, int_sizes, tags, mhandles, request);
    }
  });
}

ncclResult_t NetClient::iflush(void* recv_comm, int n, void** data, int* sizes, void** mhandles,
                               void** request) {
  return visit(version_, table_,
               [&](auto* t) { return t->iflush(recv_comm, n, data, sizes, mhandles, request); });
}

ncclResult_t NetClient::test(void* request, int* done, int* sizes) {
  return visit(version_, table_, [&](auto* t) { return t->test(request, done, sizes); });
}

ncclResult_t NetClient::close_send(void* comm) {
  return visit(version_, table_, [&](auto* t) { return t->closeSend(comm); });
}

ncclResult_t NetClient::close_recv(void* comm) {
  return visit(version_, table_, [&](auto* t) { return t->closeRecv(comm); });
}

ncclResult_t NetClient::close_listen(void* comm) {
  return visit(version_, table_, [&](auto* t) { return t->closeListen(comm); });
}

const ncclNet_v6_t* NetClient::v6() const {
  return version_ == 6 ? static_cast<const ncclNet_v6_t*>(table_) : nullptr;
}
const ncclNet_v7_t* NetClient::v7() const {
  return version_ == 7 ? static_cast<const ncclNet_v7_t*>(table_) : nullptr;
}
const ncclNet_v8_t* NetClient::v8() const {
  return version_ == 8 ? static_cast<const ncclNet_v8_t*>(table_) : nullptr;
}
const ncclNet_v9_t* NetClient::v9() const {
  return version_ == 9 ? static_cast<const ncclNet_v9_t*>(table_) : nullptr;
}
const ncclNet_v10_t* NetClient::v10() const {
  return version_ == 10 ? static_cast<const ncclNet_v10_t*>(table_) : nullptr;
}
const ncclNet_v11_t* NetClient::v11() const {
  return version_ == 11 ? static_cast<const ncclNet_v11_t*>(table_) : nullptr;
}
const ncclNet_v12_t* NetClient::v12() const {
  return version_ == 12 ? static_cast<const ncclNet_v12_t*>(table_) : nullptr;
}

std::vector<int> exported_abi_versions(const std::string& path, std::string& error) {
  std::vector<int> versions;
  dlerror();
  LibGuard guard{dlopen(path.c_str(), RTLD_LAZY | RTLD_LOCAL)};
  if (guard.lib == nullptr) {
    const char* msg = dlerror();
    error = "cannot load " + path + ": " + (msg != nullptr ? msg : "unknown dlopen error");
    return versions;
  }
  for (int v = kMaxAbi; v >= kMinAbi; --v) {
    if (dlsym(guard.lib, symbol_name(v).c_str()) != nullptr) versions.push_back(v);
  }
  if (versions.empty()) error = path + " exports no ncclNetPlugin_vN symbol";
  return versions;
}

std::string loaded_library_path(void* handle) {
  link_map* map = nullptr;
  if (handle == nullptr || dlinfo(handle, RTLD_DI_LINKMAP, &map) != 0 || map == nullptr ||
      map->l_name == nullptr) {
    return {};
  }
  char resolved[PATH_MAX];
  return realpath(map->l_name, resolved) != nullptr ? resolved : map->l_name;
}

std::string NetClient::library_path() const {
  return loaded_library_path(lib_);
}

std::string file_beside_program(const std::string& relative) {
  char exe[4096];
  const ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
  if (n <= 0) return {};
  exe[n] = '\0';
  std::string path(exe);
  path.resize(path.rfind('/') + 1);
  path += relative;
  return access(path.c_str(), R_OK) == 0 ? path : std::string();
}

}  // namespace weft
