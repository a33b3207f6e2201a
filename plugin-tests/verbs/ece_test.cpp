// Enhanced Connection Establishment over softverbs (SOFTVERBS_ECE): each
// rank sets the negotiated ECE on every queue pair of its connection before
// RTR (softverbs refuses it later), then bytes are checked across it.
//   WEFT_TEST_ECE_SETS  ibv_set_ece calls expected in each rank (the queue
//                       pairs per connection, or 0 where ECE is off)
#include <dlfcn.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <string>

#include "net_ops.h"
#include "pattern.h"
#include "softverbs.h"
#include "two_rank.h"

using namespace weft;
using namespace weft::ft;

namespace {

// The counters of the softverbs weft loaded in this process.
uint64_t ece_sets() {
  const char* path = std::getenv("WEFT_IBVERBS_LIB");
  FT_REQUIRE(path != nullptr, "WEFT_IBVERBS_LIB is not set");
  void* library = ::dlopen(path, RTLD_NOW | RTLD_NOLOAD);
  FT_REQUIRE(library != nullptr, "weft has not loaded " << path);
  auto get =
      reinterpret_cast<softverbs_get_counters_fn>(::dlsym(library, "softverbs_get_counters"));
  FT_REQUIRE(get != nullptr, path << " is not softverbs");
  softverbs_counters counters{};
  get(&counters);
  ::dlclose(library);
  return counters.ece_set;
}

void side(Rank& rk, bool sender) {
  const char* expected_text = std::getenv("WEFT_TEST_ECE_SETS");
  FT_REQUIRE(expected_text != nullptr, "WEFT_TEST_ECE_SETS is not set");
  const uint64_t expected = std::strtoull(expected_text, nullptr, 10);
  auto c = open_plugin(12);
  const int dev = test_device(*c);
  void* comm = sender ? send_side_connect(*c, dev, *rk.peer) : recv_side_connect(*c, dev, *rk.peer);
  const size_t n = 1u << 20;
  Buffer buf(n);
  {
    Mr mr(*c, comm, buf.data(), n);
    if (sender) {
      fill_pattern(buf.data(), n, pattern_seed(51, 0));
      wait_ok(*c, post_isend(*c, comm, buf.data(), n, 3, mr.get()), "send over ECE");
    } else {
      int got = wait_ok(*c, post_irecv1(*c, comm, buf.data(), n, 3, mr.get()), "receive over ECE");
      FT_REQUIRE(got == static_cast<int>(n), "size " << got);
      check_received(buf.data(), n, n, pattern_seed(51, 0), "receive over ECE");
    }
  }
  const uint64_t sets = ece_sets();
  FT_REQUIRE(sets == expected, (sender ? "sender" : "receiver")
                                   << ": ibv_set_ece succeeded " << sets << " times, expected "
                                   << expected);
  rk.peer->sync("ece-done");
  FT_OK(sender ? c->close_send(comm) : c->close_recv(comm));
  FT_OK(c->finalize());
}

}  // namespace

TEST_CASE("ECE is negotiated on every queue pair before RTR, or not at all", "[ece]") {
  auto r = run_two([&](Rank& rk) { side(rk, false); }, [&](Rank& rk) { side(rk, true); });
  REQUIRE_RANKS(r);
}
