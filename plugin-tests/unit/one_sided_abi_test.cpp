// The one-sided tables' layouts against the sizes and offsets measured on
// NCCL's own headers (docs/nccl-one-sided-abi.md, x86-64): a member out of
// place fails to compile here rather than crash inside NCCL.
#include <catch2/catch.hpp>
#include <cstddef>

#include "nccl/one_sided.h"

namespace {

constexpr size_t slot(size_t index) {
  return index * sizeof(void*);
}

static_assert(sizeof(ncclNetProperties_v11_t) == 112);
static_assert(offsetof(ncclNetProperties_v11_t, latency) == 44);
static_assert(offsetof(ncclNetProperties_v11_t, netDeviceType) == 56);
static_assert(offsetof(ncclNetProperties_v11_t, vProps) == 64);
static_assert(offsetof(ncclNetProperties_v11_t, maxP2pBytes) == 88);
static_assert(offsetof(ncclNetProperties_v11_t, maxMultiRequestSize) == 104);
static_assert(sizeof(ncclNetProperties_v12_t) == 128);
static_assert(offsetof(ncclNetProperties_v12_t, maxP2pBytes) == 104);
static_assert(offsetof(ncclNetProperties_v12_t, maxMultiRequestSize) == 120);
static_assert(offsetof(ncclNetProperties_v12_t, railId) == 124);
static_assert(offsetof(ncclNetProperties_v12_t, planeId) == 126);

static_assert(sizeof(ncclGinConfig_v13_t) == 20);
static_assert(sizeof(ncclGinConfig_v14_t) == 28);
static_assert(offsetof(ncclGinConfig_v14_t, rankStride) == 24);
static_assert(sizeof(ncclGinProperties_v14_t) == 2);
static_assert(sizeof(ncclRmaConfig_v14_t) == 12);

static_assert(sizeof(ncclGin_v11_t) == slot(19));
static_assert(offsetof(ncclGin_v11_t, iputSignal) == slot(14));
static_assert(offsetof(ncclGin_v11_t, finalize) == slot(18));
static_assert(sizeof(ncclGin_v12_t) == slot(19));
static_assert(offsetof(ncclGin_v12_t, test) == slot(15));
static_assert(sizeof(ncclGin_v13_t) == slot(21));
static_assert(offsetof(ncclGin_v13_t, iget) == slot(15));
static_assert(offsetof(ncclGin_v13_t, iflush) == slot(16));
static_assert(offsetof(ncclGin_v13_t, ginProgress) == slot(18));
static_assert(sizeof(ncclRma_v13_t) == sizeof(ncclGin_v13_t));
static_assert(sizeof(ncclGin_v14_t) == slot(17));
static_assert(offsetof(ncclGin_v14_t, getGinProperties) == slot(3));
static_assert(offsetof(ncclGin_v14_t, ginProgress) == slot(14));
static_assert(sizeof(ncclRma_v14_t) == slot(21));
static_assert(offsetof(ncclRma_v14_t, createContext) == slot(6));
static_assert(offsetof(ncclRma_v14_t, iputSignal) == slot(14));
static_assert(offsetof(ncclRma_v14_t, test) == slot(17));
static_assert(offsetof(ncclRma_v14_t, rmaProgress) == slot(18));

static_assert(NCCL_NET_DEVICE_GIN_PROXY == 2 && NCCL_NET_DEVICE_GIN_GDAKI == 3);

}  // namespace

TEST_CASE("the one-sided tables have NCCL's layouts", "[unit][abi]") {
  // The checks are the static_asserts above; this case makes the file a
  // test ctest lists.
  ncclRma_v14_t table{};
  CHECK(table.iputSignal == nullptr);
  CHECK(reinterpret_cast<char*>(&table.finalize) - reinterpret_cast<char*>(&table) == slot(20));
}
