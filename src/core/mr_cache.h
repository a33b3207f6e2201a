// Registration cache, one per protection domain. NCCL registers the same
// buffers again and again (every comm, every user-buffer registration), and
// registering GPU memory costs far more than a lookup. Entries cover whole
// pages, are shared by every registration they contain, and disappear at
// their last release: NCCL deregisters before it frees, and the next
// allocation at that address is different memory.
//
// The cache only bookkeeps. The transport registers and deregisters with
// the provider outside the cache's lock, so a slow registration never
// blocks another thread's lookup.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>

namespace weft {

struct MrKey {
  uintptr_t start = 0;  // page-aligned
  uintptr_t end = 0;    // page-aligned, exclusive
  int memory_type = 0;  // NCCL_PTR_HOST or NCCL_PTR_CUDA
  int device = -1;      // CUDA ordinal; -1 for host memory
  // CUDA's id of the allocation: memory freed without deregistration and
  // allocated again at the same address is never matched.
  uint64_t buffer_id = 0;

  bool covers(const MrKey& other) const {
    return start <= other.start && other.end <= end && memory_type == other.memory_type &&
           device == other.device && buffer_id == other.buffer_id;
  }
};

// [address, address + size) widened to whole pages of `page_size` (a power of two).
inline MrKey page_aligned_key(const void* address, size_t size, size_t page_size) {
  MrKey key;
  auto begin = reinterpret_cast<uintptr_t>(address);
  key.start = begin & ~(uintptr_t{page_size} - 1);
  key.end = (begin + std::max<size_t>(size, 1) + page_size - 1) & ~(uintptr_t{page_size} - 1);
  return key;
}

struct MrCacheStats {
  uint64_t lookups = 0;
  uint64_t hits = 0;
  uint64_t inserts = 0;
  uint64_t uncached = 0;  // registrations made while the cache was full or disabled
  uint64_t live = 0;      // entries now
};

template <typename Registration>
class MrCache {
 public:
  struct Entry {
    MrKey key;
    Registration registration;
    int references = 0;
  };

  MrCache(bool enabled, size_t max_entries) : enabled_(enabled), max_entries_(max_entries) {}
  MrCache(const MrCache&) = delete;
  MrCache& operator=(const MrCache&) = delete;

  bool enabled() const { return enabled_; }

  // An entry covering `key`, with a reference taken for the caller; nullptr
  // on a miss.
  Entry* acquire(const MrKey& key) {
    std::lock_guard<std::mutex> lock(mutex_);
    ++stats_.lookups;
    if (!enabled_) return nullptr;
    // Entries starting after key.start cannot cover it; none starts more
    // than the longest entry's length before it.
    auto it = entries_.upper_bound(key.start);
    while (it != entries_.begin()) {
      --it;
      if (key.start - it->first > longest_) break;
      Entry* entry = it->second.get();
      if (entry->key.covers(key)) {
        ++entry->references;
        ++stats_.hits;
        return entry;
      }
    }
    return nullptr;
  }

  // Adds a registration the caller just made, with one reference. nullptr
  // (the caller keeps the registration uncached) when disabled or full.
  Entry* insert(const MrKey& key, Registration registration) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!enabled_ || entries_.size() >= max_entries_) {
      ++stats_.uncached;
      return nullptr;
    }
    auto entry = std::make_unique<Entry>();
    entry->key = key;
    entry->registration = std::move(registration);
    entry->references = 1;
    Entry* raw = entry.get();
    entries_.emplace(key.start, std::move(entry));
    longest_ = std::max<uintptr_t>(longest_, key.end - key.start);
    ++stats_.inserts;
    return raw;
  }

  // Drops a reference. At the last one the entry leaves the cache and its
  // registration is moved to *last for the caller to deregister.
  bool release(Entry* entry, Registration* last) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (--entry->references > 0) return false;
    auto range = entries_.equal_range(entry->key.start);
    for (auto it = range.first; it != range.second; ++it) {
      if (it->second.get() == entry) {
        *last = std::move(entry->registration);
        entries_.erase(it);
        return true;
      }
    }
    return false;  // not ours: nothing to deregister
  }

  MrCacheStats stats() const {
    std::lock_guard<std::mutex> lock(mutex_);
    MrCacheStats stats = stats_;
    stats.live = entries_.size();
    return stats;
  }

 private:
  const bool enabled_;
  const size_t max_entries_;
  mutable std::mutex mutex_;
  std::multimap<uintptr_t, std::unique_ptr<Entry>> entries_;
  uintptr_t longest_ = 0;
  MrCacheStats stats_;
};

}  // namespace weft
