// Streams and events: bookkeeping only, since all work is synchronous.
#pragma once

#include "cuda_abi.h"

struct CUstream_st {
  int device;
};
struct CUevent_st {
  int device;
};

namespace softcuda {

// The null stream or a live stream (takes g_mu).
bool valid_stream(CUstream s);

}  // namespace softcuda
