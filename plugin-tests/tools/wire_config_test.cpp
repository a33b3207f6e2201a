#include "wire_config.h"

#include <catch2/catch.hpp>
#include <cstring>
#include <string>

#include "errors.h"

using namespace weft::perf;

namespace {

WireConfig valid() {
  WireConfig c{};
  c.min_bytes = 8;
  c.max_bytes = 1 << 20;
  c.step_factor = 2;
  c.iters = 10;
  c.depth = 32;
  c.comms = 2;
  c.threads = 2;
  c.tests = 1;
  c.reg_min_bytes = 4096;
  c.reg_max_bytes = 1 << 30;
  c.reg_step_factor = 4;
  return c;
}

std::string rejection(const WireConfig& c) {
  try {
    check_config(c, "10.0.0.1:18515");
  } catch (const PerfError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("rank 1 refuses a configuration it would size memory and threads from") {
  CHECK(rejection(valid()).empty());
  auto bad = [](auto change, const char* what) {
    WireConfig c = valid();
    change(c);
    CHECK(rejection(c) ==
          std::string("peer 10.0.0.1:18515 sent an invalid configuration (") + what + ")");
  };
  bad([](WireConfig& c) { c.min_bytes = c.max_bytes + 1; }, "sizes");
  bad([](WireConfig& c) { c.max_bytes = uint64_t{1} << 50; }, "sizes");
  bad([](WireConfig& c) { c.step_factor = 1.0; }, "step factor");
  bad([](WireConfig& c) { c.iters = 0; }, "iterations or depth");
  bad([](WireConfig& c) { c.depth = 100000; }, "iterations or depth");
  bad([](WireConfig& c) { c.comms = 1000000; }, "comms/threads");
  bad([](WireConfig& c) { c.threads = 3; }, "comms/threads");
  bad([](WireConfig& c) { c.idle_comms = -1; }, "idle comms");
  bad([](WireConfig& c) { c.idle_comms = 100001; }, "idle comms");
  bad([](WireConfig& c) { c.group = -1; }, "group");
  bad([](WireConfig& c) { c.raw_op = 7; }, "raw operation");
  bad([](WireConfig& c) { c.tests = 0; }, "tests");
  bad([](WireConfig& c) { c.tests = 1u << 9; }, "tests");
  bad([](WireConfig& c) { c.reg_min_bytes = c.reg_max_bytes + 1; }, "reg sizes");
  bad([](WireConfig& c) { c.reg_max_bytes = uint64_t{1} << 50; }, "reg sizes");
  bad([](WireConfig& c) { c.reg_step_factor = 0.5; }, "reg sizes");
  bad([](WireConfig& c) { c.mem = 2; }, "memory type");
  bad([](WireConfig& c) { c.dmabuf = 1; }, "memory type");  // dma-buf of host memory
  bad([](WireConfig& c) { c.dmabuf = 2; }, "memory type");
  WireConfig gpu = valid();
  gpu.mem = 1;
  gpu.dmabuf = 1;
  CHECK(rejection(gpu).empty());
  WireConfig garbage;
  memset(&garbage, 0xff, sizeof(garbage));
  CHECK_FALSE(rejection(garbage).empty());
}
