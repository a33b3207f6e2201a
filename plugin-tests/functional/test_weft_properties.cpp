// weft's own promises about its properties, stricter than the generic
// conformance check: the name NCCL_NET=weft matches, and grouped receives
// of up to 8 (NCCL's largest group) on every device.
#include <catch2/catch.hpp>

#include "net_ops.h"
#include "two_rank.h"

using namespace weft;
using namespace weft::ft;

TEST_CASE("weft's properties: name 'weft', maxRecvs >= 8", "[weft]") {
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
    }
  });
  REQUIRE_RANKS(r);
}
