// Memory registration for this endpoint's comms on its domain (the handles
// NCCL holds are made in memory_region.cpp).
#include <rdma/fi_domain.h>

#include "ofi/endpoint/endpoint.h"

namespace weft::ofi {

int Endpoint::register_region(void* start, size_t length, const MemorySource& source,
                              const void* data, Registration* out, const char** failed_call) {
  // Reads serve the flush (the NIC reads back what it wrote).
  const uint64_t access = FI_SEND | FI_RECV | (rma_ ? (FI_READ | FI_REMOTE_READ) : 0) |
                          (rdma_ || one_sided_ ? (FI_WRITE | FI_REMOTE_WRITE) : 0);
  return domain_.register_region(start, length, source, data, access, ep_.get(), out, failed_call);
}

}  // namespace weft::ofi
