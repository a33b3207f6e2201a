// The other end of a connection, as a comm's data path (tagged or rdma)
// addresses it.
#pragma once

#include <rdma/fabric.h>

#include <cstdint>
#include <string>

namespace weft::ofi {

struct PathPeer {
  fi_addr_t address = FI_ADDR_UNSPEC;
  std::string name;
  uint32_t remote_comm_id = 0;  // the peer comm's id, for tags
  uint32_t local_comm_id = 0;
};

}  // namespace weft::ofi
