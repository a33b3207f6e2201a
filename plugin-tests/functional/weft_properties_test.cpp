// weft's own promises about its properties, stricter than the generic
// conformance check: the name NCCL_NET=weft matches, grouped receives of up
// to 8 (NCCL's largest group) on every device, and a positive speed even on
// virtual interfaces (0 would make NCCL assume 10 Gbps).
#include <catch2/catch.hpp>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include "log_capture.h"
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

namespace {

ncclNetAttr_v12_t net_attr(int send_peers, int send_flows, int recv_peers, int recv_flows) {
  ncclNetAttr_v12_t attr;
  attr.sendCommAttr = {send_peers, 1, send_flows, 1};
  attr.recvCommAttr = {recv_peers, 1, recv_flows, 1};
  attr.op = attr.algo = attr.proto = ~0u;
  return attr;
}

}  // namespace

TEST_CASE("setNetAttr: hints checked, and connections that cannot fit are named", "[weft]") {
  auto r = run_one([&](Rank&) {
    logged_lines().clear();
    auto c = load_plugin(12);
    FT_OK(c->init(capture_log));
    const auto* net = c->v12();
    FT_REQUIRE(net != nullptr && net->setNetAttr != nullptr, "no v12 setNetAttr");
    // A listen opens the device, as NCCL's does before its connects.
    char handle[NCCL_NET_HANDLE_MAXSIZE] = {};
    void* listen = nullptr;
    FT_OK(c->listen(test_device(*c), handle, &listen));
    // What init and listen said (some flavours warn there): not this test's.
    logged_lines().clear();
    ncclNetAttr_v12_t fits = net_attr(2, 2, 2, 2);
    FT_OK(net->setNetAttr(c->context(), &fits));
    FT_REQUIRE(logged_text().find("expects up to 2 send peers x 2 flows, 2 receive peers x 2 "
                                  "flows") != std::string::npos,
               "the first hints are not logged:\n"
                   << logged_text());
    FT_REQUIRE(logged_text(NCCL_LOG_WARN).empty(), "warned for 8 comms:\n" << logged_text());
    // min above max, or below -1: refused by name.
    ncclNetAttr_v12_t bad = net_attr(2, 2, 2, 2);
    bad.recvCommAttr.minFlowsPerPeer = 3;
    FT_REQUIRE(net->setNetAttr(c->context(), &bad) == ncclInvalidArgument, "min > max accepted");
    FT_REQUIRE(logged_text(NCCL_LOG_WARN).find("receive flows per peer: min 3, max 2") !=
                   std::string::npos,
               logged_text(NCCL_LOG_WARN));
    bad = net_attr(-5, 2, 2, 2);
    FT_REQUIRE(net->setNetAttr(c->context(), &bad) == ncclInvalidArgument, "max -5 accepted");
    FT_REQUIRE(net->setNetAttr(c->context(), nullptr) == ncclInvalidArgument, "NULL accepted");
    // Far more connections than any device holds queue pairs for: the
    // verbs transport says so (once); libfabric's hold no per-connection
    // device objects that run out, and stay quiet.
    logged_lines().clear();
    ncclNetAttr_v12_t huge = net_attr(1 << 20, 64, 1 << 20, 64);
    FT_OK(net->setNetAttr(c->context(), &huge));
    FT_OK(net->setNetAttr(c->context(), &huge));
    const std::string warned = logged_text(NCCL_LOG_WARN);
    const char* transport = std::getenv("WEFT_TRANSPORT");
    if (transport != nullptr && std::string(transport) == "verbs") {
      const size_t at = warned.find("queue pairs (67108864 send comms x");
      FT_REQUIRE(at != std::string::npos, "no queue pair warning:\n" << logged_text());
      FT_REQUIRE(warned.find("queue pairs (", at + 1) == std::string::npos, "warned twice");
      FT_REQUIRE(warned.find("WEFT_IB_QPS_PER_CONNECTION") != std::string::npos, warned);
    } else {
      FT_REQUIRE(warned.empty(), "warned:\n" << warned);
    }
    FT_OK(c->close_listen(listen));
  });
  REQUIRE_RANKS(r);
}
