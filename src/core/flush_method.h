// How iflush makes the data a NIC wrote into GPU memory visible to the GPU
// before NCCL reads it, one choice per device, from WEFT_GDR_FLUSH
// (NCCL_GDR_FLUSH_DISABLE=1 is read as "off" by the parameter layer).
#pragma once

#include <string>

namespace weft {

enum class FlushMethod {
  None,  // no flush
  Read,  // a 1-byte RDMA read from the last GPU buffer, through the NIC
  Cuda,  // cuFlushGPUDirectRDMAWrites
};

// The method `setting` (auto|read|cuda|off) asks for, given whether the
// device can read through the NIC (`has_read`) and whether the CUDA flush
// may be used (`has_cuda_flush`). auto prefers read, then cuda; a method
// the device lacks means none.
FlushMethod choose_flush(const std::string& setting, bool has_read, bool has_cuda_flush);

}  // namespace weft
