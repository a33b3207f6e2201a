// What every transport's one-sided connect does the same way: check the N
// handles NCCL gathered before any is used, and say which ranks were not
// heard from.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/handle_header.h"
#include "nccl/types.h"
#include "weft/one_sided.h"

namespace weft {

struct RmaHandleRules {
  TransportId transport = TransportId::OfiRma;
  uint32_t fingerprint = 0;
  // Why another fingerprint does not mix ("another libfabric provider").
  const char* fingerprint_mismatch = "";
  // False with *problem when a rank's payload is unusable.
  std::function<bool(int rank, const ListenHandle& handle, std::string* problem)> check_payload;
  // Whether the handle is the one this rank's listen made.
  std::function<bool(const ListenHandle& handle)> is_own;
};

// Decodes all `nranks` handles into *out, or logs the first problem
// (naming the rank, on `device`) and returns its NCCL error: a handle that
// is NULL, corrupt, of another transport or fingerprint, or out of rank
// order (this rank's own not at `rank`, or found elsewhere).
ncclResult_t decode_rma_handles(void* const* handles, int nranks, int rank,
                                const std::string& device, const RmaHandleRules& rules,
                                std::vector<ListenHandle>* out);

// OneSidedTransport::rma_connect of a transport whose comm type offers
// `static ncclResult_t connect(handles, nranks, rank, ListenComm*,
// timeout_ms, std::unique_ptr<Comm>*)`: NCCL gets the comm only once it
// is connected.
template <typename Comm, typename ListenComm>
ncclResult_t connect_rma_comm(void* const* handles, int nranks, int rank, RmaListenComm* listen,
                              int timeout_ms, RmaComm** comm) {
  *comm = nullptr;
  std::unique_ptr<Comm> made;
  ncclResult_t result =
      Comm::connect(handles, nranks, rank, static_cast<ListenComm*>(listen), timeout_ms, &made);
  if (result == ncclSuccess) *comm = made.release();
  return result;
}

// "1 (10.0.0.2:4000), 3 (10.0.0.4:4000)": the ranks not `heard`, by name.
std::string unheard_ranks(const std::vector<bool>& heard, const std::vector<std::string>& names);
// The warning of a collective step some ranks never answered.
void warn_unheard(const char* what, const std::string& device, int rank, int timeout_ms,
                  const std::string& missing);

}  // namespace weft
