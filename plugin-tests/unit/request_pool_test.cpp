#include "core/request_pool.h"

#include <catch2/catch.hpp>
#include <set>
#include <vector>

TEST_CASE("the request pool hands out every slot once and refuses when empty", "[unit][pool]") {
  weft::RequestPool<int, 32> pool;
  std::set<int*> taken;
  for (int i = 0; i < 32; ++i) {
    int* item = pool.acquire();
    REQUIRE(item != nullptr);
    CHECK(pool.index_of(item) == i);
    CHECK(taken.insert(item).second);
  }
  CHECK(pool.acquire() == nullptr);
  CHECK(pool.in_use() == 32);
  int* first = *taken.begin();
  REQUIRE(pool.release(first));
  CHECK(pool.acquire() == first);
}

TEST_CASE("the request pool rejects double and foreign releases", "[unit][pool]") {
  weft::RequestPool<int, 4, 4> pool;
  int* item = pool.acquire();
  REQUIRE(pool.release(item));
  CHECK_FALSE(pool.release(item));
  int outside = 0;
  CHECK_FALSE(pool.release(&outside));
  CHECK(pool.index_of(&outside) == -1);
  CHECK(pool.in_use() == 0);
  CHECK_FALSE(pool.is_used(item));
}

TEST_CASE("the request pool allocates a chunk only past its high-water mark", "[unit][pool]") {
  weft::RequestPool<uint64_t, 64, 8> pool;
  CHECK(pool.allocated() == 0);
  // A comm that keeps a few requests in flight stays on one chunk.
  for (int round = 0; round < 100; ++round) {
    uint64_t* a = pool.acquire();
    uint64_t* b = pool.acquire();
    REQUIRE((a != nullptr && b != nullptr));
    *a = 1;
    *b = 2;
    REQUIRE(pool.release(a));
    REQUIRE(pool.release(b));
  }
  CHECK(pool.allocated() == 8);

  // Growing keeps every object where it was, with its index.
  std::vector<uint64_t*> taken;
  for (int i = 0; i < 9; ++i) {
    taken.push_back(pool.acquire());
    REQUIRE(taken.back() != nullptr);
    *taken.back() = static_cast<uint64_t>(i);
  }
  CHECK(pool.allocated() == 16);
  for (int i = 0; i < 9; ++i) {
    CHECK(*taken[static_cast<size_t>(i)] == static_cast<uint64_t>(i));
    CHECK(pool.index_of(taken[static_cast<size_t>(i)]) == i);
  }
  while (pool.acquire() != nullptr) {
  }
  CHECK(pool.allocated() == 64);
  CHECK(pool.in_use() == 64);
}

TEST_CASE("the request pool visits exactly the objects in use", "[unit][pool]") {
  weft::RequestPool<int, 16, 4> pool;
  std::vector<int*> taken;
  for (int i = 0; i < 10; ++i) {
    taken.push_back(pool.acquire());
    *taken.back() = i;
  }
  REQUIRE(pool.release(taken[3]));
  REQUIRE(pool.release(taken[8]));
  int sum = 0;
  int count = 0;
  pool.for_each_in_use([&](int& value) {
    sum += value;
    ++count;
  });
  CHECK(count == 8);
  CHECK(sum == 45 - 3 - 8);
  CHECK(pool.any_in_use([](int& value) { return value == 9; }));
  CHECK_FALSE(pool.any_in_use([](int& value) { return value == 8; }));
}
