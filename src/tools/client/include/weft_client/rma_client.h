// Any plugin's one-sided table, driven through its exported ABI only: one
// interface over ncclRmaPlugin_v14/v13 and ncclGinPlugin_v13/v12/v11, so
// every check of the RMA suite, and weft-perf's put/get/signal, run
// against each of them. GIN v11/v12 have no contexts: operations go on the
// comm itself (an RmaTarget with a null context), as NCCL's proxy calls
// them. Like NetClient, it does not link weft: the plugin is reached by
// dlopen/dlsym as NCCL reaches it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "nccl/one_sided.h"

namespace weft {

// Where operations go: a context block (RMA, GIN v13) or the comm (v11/v12).
struct RmaTarget {
  void* comm = nullptr;
  void* context = nullptr;
};

class RmaClient {
 public:
  // `which`: rma17, rma16, rma15, rma14, rma13, gin13, gin12 or gin11.
  // Loads `path` with RTLD_LOCAL; false and `error` when the symbol is
  // missing.
  bool load(const std::string& path, const std::string& which, std::string* error);
  const std::string& symbol() const { return symbol_; }
  int version() const { return version_; }
  bool has_contexts() const { return version_ >= 13; }
  bool has_get() const { return version_ >= 13; }
  bool has_strength() const { return version_ >= 14; }
  bool has_rma_properties() const { return version_ >= 16; }
  // v15+: the optFlags every iput/iputSignal/iget passes (0 by default).
  void set_opt_flags(uint32_t flags) { opt_flags_ = flags; }

  // `logger` may be nullptr (the plugin's log is dropped).
  ncclResult_t init(void** ctx, ncclDebugLogger_t logger = nullptr) const;
  ncclResult_t finalize(void* ctx) const;
  ncclResult_t devices(int* ndev) const;
  ncclResult_t properties(int dev, int* device_type, int* max_recvs, int* ptr_support) const;
  ncclResult_t listen(void* ctx, int dev, void* handle, void** listen_comm) const;
  ncclResult_t connect(void* ctx, void** handles, int nranks, int rank, void* listen_comm,
                       void** comm) const;
  ncclResult_t close_listen(void* listen_comm) const;
  ncclResult_t close_coll(void* comm) const;
  // Every rank of `nranks` addressed (v14-v16: rank stride 1, v17: all
  // listed). v11/v12: no call, the comm is the target.
  ncclResult_t create_context(void* comm, int contexts, int nranks, RmaTarget* target) const;
  // v17: a context addressing only `peers` (ncclInvalidUsage before).
  ncclResult_t create_context_with_peers(void* comm, int contexts, const std::vector<int>& peers,
                                         RmaTarget* target) const;
  // v16+: getRmaProperties; ncclInvalidUsage before.
  ncclResult_t rma_properties(void* comm, bool* flushes_all_puts_on_any_signal) const;
  ncclResult_t destroy_context(const RmaTarget& target) const;
  ncclResult_t reg(void* comm, void* data, size_t size, int type, uint64_t flags,
                   void** mhandle) const;
  ncclResult_t dereg(void* comm, void* mhandle) const;
  ncclResult_t put(const RmaTarget& target, int context, uint64_t src_off, void* src, size_t size,
                   uint64_t dst_off, void* dst, uint32_t rank, void** request) const;
  ncclResult_t put_signal(const RmaTarget& target, int context, uint64_t src_off, void* src,
                          size_t size, uint64_t dst_off, void* dst, uint32_t rank,
                          uint64_t signal_off, void* signal, uint64_t value, uint32_t op,
                          bool strong, void** request) const;
  ncclResult_t get(const RmaTarget& target, int context, uint64_t remote_off, void* remote,
                   size_t size, uint64_t local_off, void* local, uint32_t rank,
                   void** request) const;
  ncclResult_t flush(const RmaTarget& target, int context, void* mhandle, uint32_t rank,
                     void** request) const;
  ncclResult_t test(void* comm, void* request, int* done) const;
  ncclResult_t progress(const RmaTarget& target) const;
  ncclResult_t query_last_error(const RmaTarget& target, bool* has_error) const;

 private:
  // Calls f with the loaded table, typed by its version (RMA v13 has the
  // GIN v13 layout).
  template <class F>
  ncclResult_t visit(F&& f) const;

  std::string symbol_;
  int version_ = 0;
  const void* table_ = nullptr;
  uint32_t opt_flags_ = 0;
};

}  // namespace weft
