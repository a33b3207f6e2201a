#include "core/request_pool.h"

#include <catch2/catch.hpp>
#include <set>

TEST_CASE("the request pool hands out every slot once and refuses when empty", "[unit][pool]") {
  weft::RequestPool<int, 32> pool;
  std::set<int*> taken;
  for (int i = 0; i < 32; ++i) {
    int* item = pool.acquire();
    REQUIRE(item != nullptr);
    CHECK(taken.insert(item).second);
  }
  CHECK(pool.acquire() == nullptr);
  CHECK(pool.in_use() == 32);
  int* first = *taken.begin();
  REQUIRE(pool.release(first));
  CHECK(pool.acquire() == first);
}

TEST_CASE("the request pool rejects double and foreign releases", "[unit][pool]") {
  weft::RequestPool<int, 4> pool;
  int* item = pool.acquire();
  REQUIRE(pool.release(item));
  CHECK_FALSE(pool.release(item));
  int outside = 0;
  CHECK_FALSE(pool.release(&outside));
  CHECK(pool.in_use() == 0);
  CHECK_FALSE(pool.is_used(item));
}
