// A failed completion in NCCL's terms, for every comm and data path.
#pragma once

#include <cstddef>
#include <string>

#include "nccl/types.h"

namespace weft::ofi {

class Endpoint;

// Translates a failed completion into NCCL's error codes, logging the
// operation, device, peer and the provider's text.
ncclResult_t completion_failure(const char* operation, Endpoint& endpoint,
                                const std::string& peer_name, int error, size_t overflow_length,
                                size_t posted_size, const char* text);

}  // namespace weft::ofi
