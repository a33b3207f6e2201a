#include "core/mr_cache.h"

#include <atomic>
#include <catch2/catch.hpp>
#include <string>
#include <thread>
#include <vector>

using weft::MrCache;
using weft::MrKey;
using weft::page_aligned_key;

namespace {

constexpr size_t kPage = 4096;

MrKey host_key(uintptr_t address, size_t size) {
  MrKey key = page_aligned_key(reinterpret_cast<void*>(address), size, kPage);
  key.memory_type = 1;
  return key;
}

}  // namespace

TEST_CASE("keys cover whole pages", "[unit][mrcache]") {
  MrKey key = page_aligned_key(reinterpret_cast<void*>(0x10010), 100, kPage);
  CHECK(key.start == 0x10000);
  CHECK(key.end == 0x11000);
  key = page_aligned_key(reinterpret_cast<void*>(0x10ff0), 0x20, kPage);
  CHECK(key.start == 0x10000);
  CHECK(key.end == 0x12000);
  key = page_aligned_key(reinterpret_cast<void*>(0x10000), 0, kPage);
  CHECK(key.end == 0x11000);  // a 0-byte registration still names its page
}

TEST_CASE("a registration inside a cached one shares it until the last release",
          "[unit][mrcache]") {
  MrCache<std::string> cache(true, 16);
  REQUIRE(cache.acquire(host_key(0x100000, 1 << 20)) == nullptr);
  auto* whole = cache.insert(host_key(0x100000, 1 << 20), "whole");
  REQUIRE(whole != nullptr);
  auto* inner = cache.acquire(host_key(0x100000 + 8192 + 17, 4096));
  REQUIRE(inner == whole);
  CHECK(cache.acquire(host_key(0x100000 + (1 << 20) - 8, 16)) == nullptr);  // runs past the end
  std::string last;
  CHECK_FALSE(cache.release(inner, &last));
  CHECK(last.empty());
  CHECK(cache.release(whole, &last));
  CHECK(last == "whole");
  // Gone after the last release: the address may hold other memory now.
  CHECK(cache.acquire(host_key(0x100000, 4096)) == nullptr);
  auto stats = cache.stats();
  CHECK(stats.lookups == 4);
  CHECK(stats.hits == 1);
  CHECK(stats.inserts == 1);
  CHECK(stats.live == 0);
}

TEST_CASE("memory type, device and allocation id must match", "[unit][mrcache]") {
  MrCache<int> cache(true, 16);
  MrKey gpu = host_key(0x200000, 65536);
  gpu.memory_type = 2;
  gpu.device = 0;
  gpu.buffer_id = 7;
  REQUIRE(cache.insert(gpu, 1) != nullptr);
  MrKey other_device = gpu;
  other_device.device = 1;
  MrKey reallocated = gpu;
  reallocated.buffer_id = 8;
  MrKey host = host_key(0x200000, 65536);
  CHECK(cache.acquire(other_device) == nullptr);
  CHECK(cache.acquire(reallocated) == nullptr);
  CHECK(cache.acquire(host) == nullptr);
  CHECK(cache.acquire(gpu) != nullptr);
}

TEST_CASE("a long entry far below the lookup address is still found", "[unit][mrcache]") {
  MrCache<int> cache(true, 64);
  REQUIRE(cache.insert(host_key(0x1000000, 64 << 20), 1) != nullptr);
  for (uintptr_t i = 0; i < 20; ++i) {
    REQUIRE(cache.insert(host_key(0x2000000 + i * 0x10000, 4096), static_cast<int>(i + 2)));
  }
  auto* found = cache.acquire(host_key(0x2000000 + 20 * 0x10000, 4096));
  REQUIRE(found != nullptr);
  CHECK(found->registration == 1);
}

TEST_CASE("a full or disabled cache registers without caching", "[unit][mrcache]") {
  MrCache<int> full(true, 2);
  CHECK(full.insert(host_key(0x10000, 1), 1) != nullptr);
  CHECK(full.insert(host_key(0x20000, 1), 2) != nullptr);
  CHECK(full.insert(host_key(0x30000, 1), 3) == nullptr);
  CHECK(full.stats().uncached == 1);

  MrCache<int> off(false, 100);
  CHECK(off.insert(host_key(0x10000, 1), 1) == nullptr);
  CHECK(off.acquire(host_key(0x10000, 1)) == nullptr);
  CHECK(off.stats().hits == 0);
}

TEST_CASE("concurrent users of one entry release it exactly once", "[unit][mrcache]") {
  MrCache<int> cache(true, 16);
  auto* entry = cache.insert(host_key(0x400000, 1 << 16), 42);
  REQUIRE(entry != nullptr);
  std::atomic<int> deregistered{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 10000; ++i) {
        auto* again = cache.acquire(host_key(0x400000 + 4096, 100));
        if (again == nullptr) continue;
        int last = 0;
        if (cache.release(again, &last)) deregistered.fetch_add(1);
      }
    });
  }
  for (auto& thread : threads) thread.join();
  CHECK(deregistered.load() == 0);  // the first reference is still held
  int last = 0;
  CHECK(cache.release(entry, &last));
  CHECK(last == 42);
}
