// A symmetric registration of a one-sided comm (weft/one_sided.h), as
// every transport keeps it: this rank's copy, and where every rank's copy
// is (address and key as that rank's device names them).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "nccl/types.h"

namespace weft {

struct RmaWindow {
  uint64_t address = 0;  // as that rank's device names it (VA or offset)
  uint64_t key = 0;
  uint64_t size = 0;
};

// What a comm (symmetric_comm.h: windows on demand) knows of a rank's copy
// of a region.
enum class RmaWindowState : uint8_t { Unknown = 0, Asked = 1, Known = 2, Missing = 3 };

// NCCL's mhandle of a symmetric registration.
struct RmaRegion {
  static constexpr uint32_t kMagic = 0x57524d52;  // "WRMR"
  uint32_t magic = kMagic;
  uint32_t id = 0;  // the collective step that registered it: the same on every rank
  int type = NCCL_PTR_HOST;
  const void* comm = nullptr;  // the comm it was registered on
  uint8_t* base = nullptr;
  size_t size = 0;
  void* local = nullptr;           // the transport's registration of this rank's copy
  void* descriptor = nullptr;      // what the transport's operations name it by
  std::vector<RmaWindow> windows;  // by rank, this one included
  // RmaWindowState by rank, stored (release) once windows[rank] is written.
  std::unique_ptr<std::atomic<uint8_t>[]> window_state;
};

}  // namespace weft
