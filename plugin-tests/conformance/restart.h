// A fresh plugin instance followed by one verified transfer, the unit the
// close and init/finalize-cycle checks repeat: v6..v10 unload the library
// and load it again (init is per process there), v11+ init a new context on
// the loaded one (per communicator).
#pragma once

#include <cstdint>
#include <memory>

#include "two_rank.h"
#include "weft_client/net_client.h"

namespace weft::ft {

// Initializes `c` again (loading it when null), connects to the peer rank,
// moves 1 MiB (receiver checks every byte), closes, finalizes.
void transfer_after_restart(std::unique_ptr<NetClient>& c, int v, Rank& rk, bool receiver,
                            uint64_t seed);

}  // namespace weft::ft
