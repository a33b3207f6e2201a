// Device and GID selection of the verbs transport: NCCL_IB_HCA syntax and
// RoCE GID choice, each rejection with its reason.
#include <arpa/inet.h>

#include <catch2/catch.hpp>
#include <cstring>

#include "verbs/gid_select.h"
#include "verbs/hca_filter.h"
#include "verbs/ibverbs_api.h"

using namespace weft::verbs;

TEST_CASE("HCA lists in NCCL_IB_HCA syntax", "[unit][verbs]") {
  HcaFilter filter;
  std::string error;
  REQUIRE(HcaFilter::parse("", &filter, &error));
  CHECK(filter.selects("mlx5_0", 1));

  REQUIRE(HcaFilter::parse("mlx5_0:1,mlx5_1", &filter, &error));
  CHECK(filter.selects("mlx5_0", 1));
  CHECK_FALSE(filter.selects("mlx5_0", 2));  // port given: only that one
  CHECK(filter.selects("mlx5_1", 2));
  CHECK(filter.selects("mlx5_10", 1));  // prefix match, as NCCL
  CHECK_FALSE(filter.selects("mlx4_0", 1));

  REQUIRE(HcaFilter::parse("=mlx5_1", &filter, &error));
  CHECK(filter.selects("mlx5_1", 1));
  CHECK_FALSE(filter.selects("mlx5_10", 1));

  REQUIRE(HcaFilter::parse("^mlx5_3", &filter, &error));
  CHECK_FALSE(filter.selects("mlx5_3", 1));
  CHECK(filter.selects("mlx5_0", 1));

  REQUIRE(HcaFilter::parse("^=mlx5_3:2", &filter, &error));
  CHECK(filter.selects("mlx5_3", 1));
  CHECK_FALSE(filter.selects("mlx5_3", 2));
  CHECK(filter.selects("mlx5_30", 2));
}

TEST_CASE("malformed HCA lists are refused with the reason", "[unit][verbs]") {
  HcaFilter filter;
  std::string error;
  CHECK_FALSE(HcaFilter::parse("^", &filter, &error));
  CHECK_THAT(error, Catch::Contains("names no device"));
  CHECK_FALSE(HcaFilter::parse("mlx5_0,,mlx5_1", &filter, &error));
  CHECK_THAT(error, Catch::Contains("empty device name"));
  CHECK_FALSE(HcaFilter::parse("mlx5_0:x", &filter, &error));
  CHECK_THAT(error, Catch::Contains("port 'x' of mlx5_0"));
  CHECK_FALSE(HcaFilter::parse("mlx5_0:0", &filter, &error));
  CHECK_FALSE(HcaFilter::parse("mlx5_0:", &filter, &error));
  CHECK_FALSE(HcaFilter::parse("mlx5 0", &filter, &error));
  CHECK_THAT(error, Catch::Contains("contains a space"));
}

namespace {

GidEntry gid(int index, const char* address, GidType type) {
  GidEntry entry;
  entry.index = index;
  entry.type = type;
  REQUIRE(inet_pton(AF_INET6, address, entry.gid) == 1);
  return entry;
}

// A RoCE port's table as the kernel fills it: link-local and IPv4-mapped
// entries, each as v1 and v2. Built inside the tests (gid() asserts).
std::vector<GidEntry> roce_table() {
  return {
      gid(0, "fe80::1", GidType::RoceV1),
      gid(1, "fe80::1", GidType::RoceV2),
      gid(2, "::ffff:10.1.0.5", GidType::RoceV1),
      gid(3, "::ffff:10.1.0.5", GidType::RoceV2),
      gid(4, "::ffff:192.168.7.5", GidType::RoceV2),
      gid(5, "fd00::5", GidType::RoceV2),
  };
}

}  // namespace

TEST_CASE("RoCE GID selection: version, family, range, explicit index", "[unit][verbs]") {
  const std::vector<GidEntry> kRoce = roce_table();
  int index = -1;
  std::string error;
  GidPolicy policy;
  REQUIRE(select_gid(kRoce, policy, &index, &error));
  CHECK(index == 3);  // first RoCE v2 IPv4 GID, link-local skipped

  policy.roce_version = 1;
  REQUIRE(select_gid(kRoce, policy, &index, &error));
  CHECK(index == 2);

  policy = GidPolicy{};
  REQUIRE(parse_subnet("192.168.0.0/16", &policy.range, &error));
  policy.has_range = true;
  REQUIRE(select_gid(kRoce, policy, &index, &error));
  CHECK(index == 4);

  policy = GidPolicy{};
  policy.ipv4 = false;
  REQUIRE(select_gid(kRoce, policy, &index, &error));
  CHECK(index == 5);  // fe80:: is not routable

  policy = GidPolicy{};
  policy.index = 1;
  REQUIRE(select_gid(kRoce, policy, &index, &error));
  CHECK(index == 1);  // explicit wins, even link-local
  policy.index = 9;
  CHECK_FALSE(select_gid(kRoce, policy, &index, &error));
  CHECK_THAT(error, Catch::Contains("GID index 9"));

  policy = GidPolicy{};
  REQUIRE(parse_subnet("172.16.0.0/12", &policy.range, &error));
  policy.has_range = true;
  CHECK_FALSE(select_gid(kRoce, policy, &index, &error));
  CHECK_THAT(error, Catch::Contains("no RoCE v2 GID with an IPv4 address inside"));
  CHECK_THAT(error, Catch::Contains("3: ::ffff:10.1.0.5 (RoCE v2)"));
}

TEST_CASE("InfiniBand ports use their first GID; bad ranges are refused", "[unit][verbs]") {
  std::vector<GidEntry> ib = {gid(0, "fe80::2:c903:f:1a2b", GidType::Ib)};
  int index = -1;
  std::string error;
  REQUIRE(select_gid(ib, GidPolicy{}, &index, &error));
  CHECK(index == 0);

  Subnet subnet;
  CHECK_FALSE(parse_subnet("10.0.0.0/33", &subnet, &error));
  CHECK_THAT(error, Catch::Contains("bad prefix length"));
  CHECK_FALSE(parse_subnet("ten/8", &subnet, &error));
  REQUIRE(parse_subnet("fd00::/64", &subnet, &error));
  CHECK_FALSE(subnet.ipv4);
  CHECK(subnet.prefix == 64);
}

TEST_CASE("libibverbs is loaded at run time, with a reason when it cannot be", "[unit][verbs]") {
  std::string reason;
  CHECK(Ibverbs::load("/nonexistent/libibverbs.so.1", &reason) == nullptr);
  CHECK_THAT(reason, Catch::Contains("cannot load /nonexistent/libibverbs.so.1"));
  CHECK_THAT(reason, Catch::Contains("WEFT_IBVERBS_LIB"));
  // A library that is not libibverbs: every missing symbol named.
  reason.clear();
  CHECK(Ibverbs::load("libc.so.6", &reason) == nullptr);
  CHECK_THAT(reason, Catch::Contains("lacks ibv_get_device_list"));
  // rdma-core's own (a build dependency): every required call resolves and
  // listing devices works even where there are none.
  reason.clear();
  auto ibverbs = Ibverbs::load("libibverbs.so.1", &reason);
  REQUIRE(ibverbs != nullptr);
  CHECK(ibverbs->api().reg_mr_iova2 != nullptr);  // rdma-core >= 29
  int count = -1;
  ibv_device** list = ibverbs->api().get_device_list(&count);
  CHECK(count >= 0);
  if (list != nullptr) ibverbs->api().free_device_list(list);
}
