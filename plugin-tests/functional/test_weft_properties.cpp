// weft's own promises about its properties, stricter than the generic
// conformance check: the name NCCL_NET=weft matches, grouped receives of up
// to 8 (NCCL's largest group) on every device, and a positive speed even on
// virtual interfaces (0 would make NCCL assume 10 Gbps).
#include <catch2/catch.hpp>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include "net_ops.h"
#include "two_rank.h"

using namespace weft;
using namespace weft::ft;

TEST_CASE("weft's properties: name 'weft', maxRecvs >= 8, speed > 0", "[weft]") {
  const int v = GENERATE(filter(abi_version_selected, values({6, 9, 12})));
  INFO("ABI v" << v);
  auto r = run_one([&](Rank&) {
    auto c = open_plugin(v);
    const char* name = c->plugin_name();
    FT_REQUIRE(name != nullptr && std::string(name) == "weft",
               "plugin name '" << (name ? name : "(null)") << "'");
    int nd = 0;
    FT_OK(c->devices(&nd));
    for (int d = 0; d < nd; ++d) {
      NetDeviceInfo info;
      FT_OK(c->properties(d, &info));
      FT_REQUIRE(info.max_recvs >= 8,
                 "device " << d << " '" << info.name << "': maxRecvs " << info.max_recvs);
      FT_REQUIRE(info.speed_mbps > 0,
                 "device " << d << " '" << info.name << "': speed " << info.speed_mbps);
    }
  });
  REQUIRE_RANKS(r);
}

TEST_CASE("WEFT_DEFAULT_SPEED_MBPS sets the speed of devices without a link speed", "[weft]") {
  // weft reports the netdev's sysfs speed, else the provider's link speed,
  // else the default: lo and veth (tcp) have neither, rxe reports its own.
  // So read the speed under two defaults: a device without a speed follows
  // each, one with its own speed reports that same speed under both.
  auto r = run_one([&](Rank&) {
    auto speed_with = [](const char* mbps, std::string* name) {
      setenv("WEFT_DEFAULT_SPEED_MBPS", mbps, 1);
      auto c = open_plugin(12);
      NetDeviceInfo info;
      FT_OK(c->properties(test_device(*c), &info));
      FT_OK(c->finalize());
      unsetenv("WEFT_DEFAULT_SPEED_MBPS");
      *name = info.name;
      return info.speed_mbps;
    };
    std::string name;
    const int a = speed_with("12345", &name);
    const int b = speed_with("23456", &name);
    const bool defaulted = a == 12345 && b == 23456;
    const bool own = a == b && a > 0;
    FT_REQUIRE(defaulted || own, "device '" << name << "': speed " << a
                                            << " with the default 12345, " << b
                                            << " with 23456: neither the default nor its own");
    // A netdev without a speed in sysfs (lo, veth) must get the default.
    const std::string netdev = name.substr(0, name.find(':'));
    std::ifstream sysfs_speed("/sys/class/net/" + netdev + "/speed");
    int sysfs_mbps = 0;
    const bool netdev_without_speed =
        std::ifstream("/sys/class/net/" + netdev + "/ifindex").good() &&
        !(sysfs_speed >> sysfs_mbps && sysfs_mbps > 0);
    if (netdev_without_speed) {
      FT_REQUIRE(defaulted, "netdev '" << netdev << "' has no link speed, yet weft reported " << a
                                       << " with the default 12345");
    }
    if (!defaulted) {
      std::fprintf(stderr,
                   "device '%s' reports its own speed, %d Mbps: the default does not apply\n",
                   name.c_str(), a);
    }
  });
  REQUIRE_RANKS(r);
}

TEST_CASE("regIsGlobal follows the registration cache, forceFlush its parameter", "[weft]") {
  auto properties_with = [](const char* cache, const char* force_flush) {
    setenv("WEFT_MR_CACHE", cache, 1);
    setenv("WEFT_FORCE_FLUSH", force_flush, 1);
    auto r = run_one([&](Rank&) {
      auto c = open_plugin(12);
      NetDeviceInfo info;
      FT_OK(c->properties(test_device(*c), &info));
      int want_global = std::string(cache) == "1" ? 1 : 0;
      int want_flush = std::string(force_flush) == "1" ? 1 : 0;
      FT_REQUIRE(info.reg_is_global == want_global,
                 "WEFT_MR_CACHE=" << cache << ": regIsGlobal " << info.reg_is_global);
      FT_REQUIRE(info.force_flush == want_flush,
                 "WEFT_FORCE_FLUSH=" << force_flush << ": forceFlush " << info.force_flush);
    });
    unsetenv("WEFT_MR_CACHE");
    unsetenv("WEFT_FORCE_FLUSH");
    return r;
  };
  REQUIRE_RANKS(properties_with("1", "0"));
  REQUIRE_RANKS(properties_with("0", "1"));
}
