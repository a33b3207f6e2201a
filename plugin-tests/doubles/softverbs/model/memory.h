// Protection domains, registered memory regions, and the pieces of local
// memory a work request touches.
#pragma once

#include <infiniband/verbs.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "handle.h"

namespace softverbs {

class Context;
class Pd;

// A registered memory region. Remote and local addresses are in iova space:
// host address = base + (address - iova).
class Mr {
 public:
  Handle<ibv_mr, Mr> handle{};
  Pd* pd = nullptr;
  uint64_t iova = 0;
  char* base = nullptr;
  size_t length = 0;
  int access = 0;
  void* mapping = nullptr;  // dma-buf pages mmap'd by softverbs
  size_t mapping_length = 0;

  Mr() = default;
  Mr(const Mr&) = delete;
  Mr& operator=(const Mr&) = delete;
  ~Mr();

  // Host pointer for [address, address + len) or nullptr when out of bounds.
  char* translate(uint64_t address, uint64_t len) const;
};

// An address handle's entry in its PD: one number per destination GID, as
// EFA hands out (creating a second AH to the same GID shares the number).
struct AhEntry {
  ibv_gid gid{};
  uint16_t ahn = 0;
  int refs = 0;
};

class Pd {
 public:
  Handle<ibv_pd, Pd> handle{};
  std::shared_ptr<Context> context;
  std::atomic<int> users{0};  // MRs, QPs and AHs

  // Address handles (any thread).
  uint16_t add_ah(const ibv_gid& gid);
  void remove_ah(uint16_t ahn);
  // The number of this PD's AH to `gid`, or 0xffff when it has none.
  uint16_t ahn_of(const ibv_gid& gid);

 private:
  std::mutex ah_mu_;
  std::vector<AhEntry> ahs_;
  uint16_t next_ahn_ = 1;
};

// An address handle: a destination GID and the number its PD gave it.
class Ah {
 public:
  Handle<ibv_ah, Ah> handle{};
  Pd* pd = nullptr;
  ibv_gid gid{};
  uint16_t ahn = 0;
};

// A piece of local memory a WR reads from or writes to; keeps its MR (and a
// dma-buf mapping) alive while the NIC may still touch it.
struct Piece {
  char* ptr = nullptr;
  size_t len = 0;
  std::shared_ptr<Mr> mr;
};

}  // namespace softverbs
