// NetClient: drives any ncclNet plugin .so through its exported ABI only.
// Used by weft-perf, the functional tests and the conformance suite, so
// that they treat weft exactly as NCCL does (and can load other plugins).
//
// The client exposes one uniform, v12-shaped API and adapts each call to
// the version it loaded (int vs size_t sizes, init per process vs per
// communicator, config in connect vs init, phandles).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "nccl/net.h"

namespace weft {

// "ncclSuccess", "ncclRemoteError", ... for messages.
const char* nccl_result_name(ncclResult_t r);

struct NetDeviceInfo {
  std::string name;
  std::string pci_path;  // empty when NULL
  uint64_t guid = 0;
  int ptr_support = 0;
  int reg_is_global = 0;
  int force_flush = 0;
  int speed_mbps = 0;
  int port = 0;
  float latency_us = 0;
  int max_comms = 0;
  int max_recvs = 0;
  size_t max_p2p_bytes = 0;  // versions without it: INT32_MAX
  std::vector<int> vdevs;    // vProps (v9+); empty before v9
  int rail_id = -1;          // v12
  int plane_id = -1;         // v12
};

class NetClient {
 public:
  // Loads `path` with dlopen (RTLD_NOW | RTLD_LOCAL). abi_version 0 picks the
  // newest exported ncclNetPlugin_vN (12 down to 6); otherwise exactly that
  // one. On failure returns nullptr and sets `error` (dlerror text, or which
  // symbols were looked for).
  static std::unique_ptr<NetClient> load(const std::string& path, int abi_version,
                                         std::string& error);
  ~NetClient();  // finalizes if initialized (v11+), then dlclose

  int abi_version() const { return version_; }
  const char* plugin_name() const;   // the struct's name field
  std::string library_path() const;  // the file dlopen loaded, symlinks resolved

  // init: v6-v10 once per process; v11+ creates a ctx (commId, config with
  // trafficClass -1). `logger` may be nullptr; `profiler` goes to v10+.
  ncclResult_t init(ncclDebugLogger_t logger = nullptr, ncclProfilerCallback_t profiler = nullptr);
  ncclResult_t finalize();  // v11+: finalize(ctx); older: no-op
  ncclResult_t devices(int* ndev);
  ncclResult_t properties(int dev, NetDeviceInfo* info);
  // makeVDevice (v9+): ncclInvalidUsage on older versions or a NULL entry.
  ncclResult_t make_vdevice(const std::vector<int>& devs, int* dev);

  ncclResult_t listen(int dev, void* handle, void** listen_comm);
  ncclResult_t connect(int dev, void* handle, void** send_comm);  // dev handle ptr passed non-NULL
  ncclResult_t accept(void* listen_comm, void** recv_comm);
  ncclResult_t reg_mr(void* comm, void* data, size_t size, int type, void** mhandle);
  ncclResult_t dereg_mr(void* comm, void* mhandle);
  // size must fit in int for v6-v8 (else ncclInvalidArgument without calling).
  // phandle(s): the profiler parents of v10+ (ignored before).
  ncclResult_t isend(void* send_comm, void* data, size_t size, int tag, void* mhandle,
                     void** request, void* phandle = nullptr);
  ncclResult_t irecv(void* recv_comm, int n, void** data, size_t* sizes, int* tags, void** mhandles,
                     void** request, void** phandles = nullptr);
  ncclResult_t iflush(void* recv_comm, int n, void** data, int* sizes, void** mhandles,
                      void** request);
  ncclResult_t test(void* request, int* done, int* sizes);
  ncclResult_t close_send(void* comm);
  ncclResult_t close_recv(void* comm);
  ncclResult_t close_listen(void* comm);

  // Raw tables for tests that need to pass unusual arguments (NULL sizes,
  // NULL device-handle pointers, sentinel requests). Exactly one is non-null.
  const ncclNet_v6_t* v6() const;
  const ncclNet_v7_t* v7() const;
  const ncclNet_v8_t* v8() const;
  const ncclNet_v9_t* v9() const;
  const ncclNet_v10_t* v10() const;
  const ncclNet_v11_t* v11() const;
  const ncclNet_v12_t* v12() const;
  void* context() const { return ctx_; }  // v11+ ctx

 private:
  NetClient() = default;
  void* lib_ = nullptr;
  const void* table_ = nullptr;
  int version_ = 0;
  void* ctx_ = nullptr;
  bool initialized_ = false;
  // Handed to init (v11+) / connect (v10); kept alive in case the plugin
  // holds on to the pointer. trafficClass -1: undefined.
  ncclNetCommConfig_v11_t config_{-1};
};

// The file behind a dlopen handle, symlinks resolved; empty when unknown.
std::string loaded_library_path(void* handle);

// `relative` ("../lib/libnccl-net-weft.so") resolved against the directory
// of the running program, when that file exists; else empty. How the
// installed tools find the plugin installed beside them.
std::string file_beside_program(const std::string& relative);

// Versions whose symbol the library exports, newest first.
std::vector<int> exported_abi_versions(const std::string& path, std::string& error);

}  // namespace weft
