// Protection domains, registered memory regions, and the pieces of local
// memory a work request touches.
#pragma once

#include <infiniband/verbs.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>

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

class Pd {
 public:
  Handle<ibv_pd, Pd> handle{};
  std::shared_ptr<Context> context;
  std::atomic<int> users{0};  // MRs and QPs
};

// A piece of local memory a WR reads from or writes to; keeps its MR (and a
// dma-buf mapping) alive while the NIC may still touch it.
struct Piece {
  char* ptr = nullptr;
  size_t len = 0;
  std::shared_ptr<Mr> mr;
};

}  // namespace softverbs
