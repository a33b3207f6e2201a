// A listener that never accepts: connect must end in an error naming the
// peer once WEFT_CONNECT_TIMEOUT_MS has passed, not return NULL forever.
#include <catch2/catch.hpp>
#include <cstdlib>

#include "net_ops.h"
#include "two_rank.h"

using namespace weft;
using namespace weft::ft;

TEST_CASE("connect to a listener that never accepts fails after the timeout", "[timeout]") {
  const int v = GENERATE(filter(abi_version_selected, values({6, 12})));
  INFO("ABI v" << v);
  auto r = run_one([&](Rank&) {
    ::setenv("WEFT_CONNECT_TIMEOUT_MS", "300", 1);  // before the plugin reads its parameters
    auto c = open_plugin(v);
    const int dev = test_device(*c);
    Handle h;
    void* lc = do_listen(*c, dev, h);
    // The listener never calls accept, so nothing ever acknowledges.

    void* sc = nullptr;
    ncclResult_t res = ncclSuccess;
    while (res == ncclSuccess) {
      res = c->connect(dev, h.bytes, &sc);
      FT_REQUIRE(sc == nullptr, "connect returned a comm that was never accepted");
      FT_DEADLINE("waiting for connect to time out");
    }
    FT_REQUIRE(res == ncclRemoteError,
               "connect failed with " << result_name(res) << " instead of ncclRemoteError");
    FT_OK(c->close_listen(lc));
    FT_OK(c->finalize());
  });
  REQUIRE_RANKS(r);
}
