// weft's one-sided interface, shaped after NCCL's RMA tables (v14, with
// v17's listed peers). The exported ncclRmaPlugin_v13..v17 and
// ncclGinPlugin_v11..v13 tables are thin
// adapters onto it (src/abi/one_sided/exports.cpp); docs/one-sided.md says
// what each NCCL version loads.
//
// A collective comm spans the N ranks whose listen handles NCCL gathered;
// regions are registered symmetrically (every rank, same order) and name
// every rank's copy; contexts are independent ordering channels; requests
// are owned by their context and recycled once test() reported them done.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "nccl/types.h"
#include "weft/transport.h"

namespace weft {

struct RmaContextConfig {
  int contexts = 1;        // ordering channels in the block, >= 1
  int traffic_class = -1;  // -1: undefined
  int rank_stride = 1;     // only ranks r with (r - rank) % stride == 0 are addressed
  // RMA v17: the ranks addressed, listed (instead of the stride).
  bool listed_peers = false;
  std::vector<int> peers;
};

// A signal bundled with a put: a 64-bit add at `offset` in `rank`'s copy of
// `region`, visible only once the put's data (and, strong or not, every
// earlier put of the context to that rank: weft keeps the stronger order
// always) is visible there.
struct SignalSpec {
  uint64_t offset = 0;
  void* region = nullptr;  // the caller's own handle of the symmetric region
  uint64_t value = 1;
  bool strong = true;
};

class RmaContext {
 public:
  virtual ~RmaContext() = default;
  // `context` indexes the block (0 .. contexts-1). Regions are the caller's
  // handles of symmetric registrations; `signal` may be null. A put of 0
  // bytes with a signal is a signal alone (regions may then be null).
  virtual ncclResult_t put(int context, uint64_t src_offset, void* src_region, size_t size,
                           uint64_t dst_offset, void* dst_region, uint32_t rank,
                           const SignalSpec* signal, Request** request) = 0;
  virtual ncclResult_t get(int context, uint64_t remote_offset, void* remote_region, size_t size,
                           uint64_t local_offset, void* local_region, uint32_t rank,
                           Request** request) = 0;
  // Completes once every earlier get from `rank` on `context` has landed;
  // *request is null when nothing is outstanding.
  virtual ncclResult_t flush(int context, uint32_t rank, Request** request) = 0;
  virtual ncclResult_t progress() = 0;
  // Whether an operation of this block failed (NCCL's queryLastError).
  virtual bool failed() const = 0;
};

class RmaComm : public Comm {
 public:
  RmaComm() : Comm(CommKind::Rma) {}
  virtual int rank() const = 0;
  virtual int rank_count() const = 0;
  // Collective: every rank calls it, in the same order. The handle names
  // every rank's copy of the region.
  virtual ncclResult_t reg_mr_sym(void* data, size_t size, int type, uint64_t flags,
                                  void** mhandle) = 0;
  virtual ncclResult_t reg_mr_sym_dmabuf(void* data, size_t size, int type, uint64_t offset, int fd,
                                         uint64_t flags, void** mhandle) = 0;
  virtual ncclResult_t dereg_mr_sym(void* mhandle) = 0;
  virtual ncclResult_t create_context(const RmaContextConfig& config, RmaContext** context) = 0;
  virtual ncclResult_t destroy_context(RmaContext* context) = 0;
  // GIN v11/v12 put on the comm itself: a block of one context made on
  // first use and kept until the comm closes.
  virtual ncclResult_t default_context(RmaContext** context) = 0;
  virtual ncclResult_t progress() = 0;
};

class RmaListenComm : public Comm {
 public:
  RmaListenComm() : Comm(CommKind::RmaListen) {}
};

// What a transport with one-sided operations implements
// (Transport::one_sided()): the RMA and GIN tables' listen and connect.
class OneSidedTransport {
 public:
  // Whether `dev` has one-sided operations; if not, why.
  virtual bool rma_supported(int dev, std::string* why) const = 0;
  virtual ncclResult_t rma_listen(int dev, void* handle, RmaListenComm** listen) = 0;
  // Collective and blocking: returns once every rank answered (or an error
  // naming those that did not).
  virtual ncclResult_t rma_connect(void* const* handles, int nranks, int rank,
                                   RmaListenComm* listen, RmaComm** comm) = 0;

 protected:
  ~OneSidedTransport() = default;
};

}  // namespace weft
