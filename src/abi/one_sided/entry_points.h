// Version-independent entry points of the one-sided tables (RMA v13/v14,
// GIN v11..v13). Each catches every exception and checks the pointers NCCL
// hands back; the version adapters (one_sided/exports.cpp) only reshape
// arguments.
#pragma once

#include <cstddef>
#include <cstdint>

#include "nccl/types.h"
#include "weft/one_sided.h"

namespace weft::abi {

// init/finalize are the net plugin's (init_context, finalize_context): the
// same reference on the transport.
ncclResult_t rma_devices(int* ndev);
// getProperties: the net device's (version_adapters.h), as a GIN proxy.
ncclResult_t rma_listen(int dev, void* handle, void** listen_comm);
ncclResult_t rma_connect(void* const* handles, int nranks, int rank, void* listen_comm,
                         void** coll_comm);
ncclResult_t rma_close_listen(void* listen_comm);
ncclResult_t rma_close_coll(void* coll_comm);
// `dev_handle` (GIN tables) may be null: the RMA tables have none.
ncclResult_t rma_create_context(void* coll_comm, const RmaContextConfig& config, void** block,
                                ncclNetDeviceHandle_v11_t** dev_handle);
ncclResult_t rma_destroy_context(void* block);
ncclResult_t rma_reg_mr_sym(void* coll_comm, void* data, size_t size, int type, uint64_t flags,
                            void** mhandle);
ncclResult_t rma_reg_mr_sym_dmabuf(void* coll_comm, void* data, size_t size, int type,
                                   uint64_t offset, int fd, uint64_t flags, void** mhandle);
ncclResult_t rma_dereg_mr_sym(void* coll_comm, void* mhandle);

struct PutArgs {
  uint64_t src_offset = 0;
  void* src_region = nullptr;
  size_t size = 0;
  uint64_t dst_offset = 0;
  void* dst_region = nullptr;
  uint32_t rank = 0;
};
struct SignalArgs {
  uint64_t offset = 0;
  void* region = nullptr;
  uint64_t value = 0;
  uint32_t op = 0;  // NCCL_NET_SIGNAL_OP_*
  bool strong = true;
};
// `block`: from createContext; `coll_comm` instead (GIN v11/v12): the
// comm's default block. `signal` may be null.
ncclResult_t rma_put(void* block, int context, const PutArgs& put, const SignalArgs* signal,
                     void** request);
ncclResult_t rma_comm_put(void* coll_comm, const PutArgs& put, const SignalArgs* signal,
                          void** request);
ncclResult_t rma_get(void* block, int context, uint64_t remote_offset, void* remote_region,
                     size_t size, uint64_t local_offset, void* local_region, uint32_t rank,
                     void** request);
ncclResult_t rma_flush(void* block, int context, uint32_t rank, void** request);
ncclResult_t rma_test(void* coll_comm, void* request, int* done);
ncclResult_t rma_progress(void* block);
ncclResult_t rma_comm_progress(void* coll_comm);
ncclResult_t rma_query_last_error(void* block, bool* has_error);
// RMA v16+: what a signal makes visible, for the comm.
ncclResult_t rma_get_rma_properties(void* coll_comm, bool* flushes_all_puts_on_any_signal);
// RMA v15+: optFlags of iput/iputSignal/iget; false (logged) for bits
// weft does not know.
bool rma_opt_flags_valid(uint32_t flags, const char* what);

}  // namespace weft::abi
