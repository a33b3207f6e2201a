// WEFT_TEST_RANK_NETNS="A,B": rank r runs in network namespace A when r is
// even, B when odd (names under /run/netns, as `ip netns add` makes them),
// so ranks are hosts joined only by what the namespaces share. Set by
// in-netns.sh; nothing happens without it.
#pragma once

namespace weft::ft {

// Moves the calling process (a rank's, before it opens the plugin) into
// its namespace; throws std::runtime_error naming what failed.
void enter_rank_netns(int rank);

}  // namespace weft::ft
