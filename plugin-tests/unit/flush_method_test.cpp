#include "core/flush_method.h"

#include <catch2/catch.hpp>

using namespace weft;

TEST_CASE("auto flushes by read where the device reads, else through CUDA", "[unit][flush]") {
  CHECK(choose_flush("auto", true, true) == FlushMethod::Read);
  CHECK(choose_flush("auto", true, false) == FlushMethod::Read);
  CHECK(choose_flush("auto", false, true) == FlushMethod::Cuda);
  CHECK(choose_flush("auto", false, false) == FlushMethod::None);
}

TEST_CASE("a named flush method is used only where the device has it", "[unit][flush]") {
  CHECK(choose_flush("read", true, true) == FlushMethod::Read);
  CHECK(choose_flush("read", false, true) == FlushMethod::None);
  CHECK(choose_flush("cuda", true, true) == FlushMethod::Cuda);
  CHECK(choose_flush("cuda", true, false) == FlushMethod::None);
  CHECK(choose_flush("off", true, true) == FlushMethod::None);
}
