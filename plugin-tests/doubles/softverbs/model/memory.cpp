// Registered memory regions.

#include "memory.h"

#include <sys/mman.h>

#include <cstring>

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

uint16_t Pd::add_ah(const ibv_gid& gid) {
  std::lock_guard<std::mutex> lock(ah_mu_);
  for (AhEntry& e : ahs_) {
    if (std::memcmp(e.gid.raw, gid.raw, 16) == 0) {
      ++e.refs;
      return e.ahn;
    }
  }
  uint16_t ahn = next_ahn_++;
  if (next_ahn_ == 0xffff) next_ahn_ = 1;
  ahs_.push_back(AhEntry{gid, ahn, 1});
  return ahn;
}

void Pd::remove_ah(uint16_t ahn) {
  std::lock_guard<std::mutex> lock(ah_mu_);
  for (size_t i = 0; i < ahs_.size(); ++i) {
    if (ahs_[i].ahn == ahn && --ahs_[i].refs == 0) {
      ahs_.erase(ahs_.begin() + static_cast<std::ptrdiff_t>(i));
      return;
    }
  }
}

uint16_t Pd::ahn_of(const ibv_gid& gid) {
  std::lock_guard<std::mutex> lock(ah_mu_);
  for (const AhEntry& e : ahs_) {
    if (std::memcmp(e.gid.raw, gid.raw, 16) == 0) return e.ahn;
  }
  return 0xffff;
}

}  // namespace softverbs
