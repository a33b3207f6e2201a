// Rank 0's test parameters as sent to rank 1, which adopts them once
// check_config() accepted them.
#pragma once

#include <cstdint>
#include <string>

namespace weft::perf {

struct WireConfig {
  uint64_t min_bytes, max_bytes, iter_bytes, buffer_bytes, rate_max_bytes;
  double step_factor;
  int32_t iters, warmup, depth, check, comms, threads, group, raw_op;
  uint32_t tests;  // bit per TestKind
  char vs_raw[64];
  // reg's sweep.
  uint64_t reg_min_bytes, reg_max_bytes;
  double reg_step_factor;
  int32_t mem;     // MemType
  int32_t dmabuf;  // 1: regMrDmaBuf (mem cuda only)
  int32_t idle_comms;
};

// Throws PerfError naming the peer and what is out of range.
void check_config(const WireConfig& c, const std::string& peer);

}  // namespace weft::perf
