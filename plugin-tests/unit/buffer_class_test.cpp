#include "core/buffer_class.h"

#include <unistd.h>

#include <catch2/catch.hpp>

using namespace weft;

TEST_CASE("host memory needs no driver; other types are refused", "[unit][buffer]") {
  char data[64];
  BufferClass buffer;
  REQUIRE(classify_buffer("dev", nullptr, "off", data, sizeof(data), NCCL_PTR_HOST, &buffer) ==
          ncclSuccess);
  CHECK(buffer.type == NCCL_PTR_HOST);
  CHECK(buffer.device == -1);
  CHECK(classify_buffer("dev", nullptr, "off", data, sizeof(data), NCCL_PTR_CUDA, &buffer) ==
        ncclInvalidUsage);
  CHECK(classify_buffer("dev", nullptr, "off", data, sizeof(data), 0x40, &buffer) ==
        ncclInvalidArgument);
}

TEST_CASE("a registration key covers whole host pages", "[unit][buffer]") {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  CHECK(host_page_size() == page);
  BufferClass buffer;
  buffer.type = NCCL_PTR_CUDA;
  buffer.device = 3;
  buffer.buffer_id = 77;
  const uintptr_t start = 16 * page + 5;
  MrKey key = page_key(reinterpret_cast<const void*>(start), page, buffer);
  CHECK(key.start == 16 * page);
  CHECK(key.end == 18 * page);
  CHECK(key.memory_type == NCCL_PTR_CUDA);
  CHECK(key.device == 3);
  CHECK(key.buffer_id == 77);
}

TEST_CASE("a key is clipped to the CUDA allocation when it is known", "[unit][buffer]") {
  const size_t page = host_page_size();
  BufferClass buffer;
  MrKey key;
  key.start = 4 * page;
  key.end = 8 * page;
  CHECK(clipped_to_allocation(key, buffer).start == 4 * page);
  CHECK(clipped_to_allocation(key, buffer).end == 8 * page);
  buffer.allocation_start = 4 * page + 256;
  buffer.allocation_size = 2 * page;
  MrKey clipped = clipped_to_allocation(key, buffer);
  CHECK(clipped.start == 4 * page + 256);
  CHECK(clipped.end == 6 * page + 256);
}
