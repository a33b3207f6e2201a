// Registered memory regions.

#include "memory.h"

#include <sys/mman.h>

namespace softverbs {

Mr::~Mr() {
  if (mapping != nullptr) munmap(mapping, mapping_length);
}

char* Mr::translate(uint64_t address, uint64_t len) const {
  if (address < iova) return nullptr;
  uint64_t offset = address - iova;
  if (offset > length || len > length - offset) return nullptr;
  return base + offset;
}

}  // namespace softverbs
