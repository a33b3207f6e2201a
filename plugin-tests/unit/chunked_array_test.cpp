#include "core/chunked_array.h"

#include <catch2/catch.hpp>
#include <cstdint>
#include <set>

TEST_CASE("a chunked array allocates only the chunks its indices need", "[unit][pool]") {
  weft::ChunkedArray<int, 32, 8> array;
  CHECK(array.find(0) == nullptr);
  CHECK(array.find(31) == nullptr);
  int* twelfth = array.ensure(12);
  REQUIRE(twelfth != nullptr);
  CHECK(*twelfth == 0);  // value-initialised
  // Its chunk (8..15) exists, the others do not.
  CHECK(array.find(8) == twelfth - 4);
  CHECK(array.find(15) == twelfth + 3);
  CHECK(array.find(7) == nullptr);
  CHECK(array.find(16) == nullptr);
  *twelfth = 42;
  CHECK(array.ensure(12) == twelfth);  // not allocated again
  CHECK(array.ensure(30) != nullptr);
  CHECK(*array.find(12) == 42);  // elements do not move
  CHECK(array.index_of(twelfth) == 12);
  CHECK(array.index_of(array.find(30)) == 30);
  int outside = 0;
  CHECK(array.index_of(&outside) == -1);
  std::set<size_t> visited;
  array.for_each_allocated([&](int&, size_t index) { visited.insert(index); });
  CHECK(visited.size() == 16);
  CHECK(*visited.begin() == 8);
  CHECK(*visited.rbegin() == 31);
}

TEST_CASE("a chunked array refuses indices beyond its capacity", "[unit][pool]") {
  weft::ChunkedArray<int, 16, 4> array;
  CHECK(array.find(16) == nullptr);
  CHECK(array.ensure(16) == nullptr);
  CHECK(array.ensure(SIZE_MAX) == nullptr);
  array.for_each_allocated([](int&, size_t) { FAIL("nothing is allocated"); });
}
