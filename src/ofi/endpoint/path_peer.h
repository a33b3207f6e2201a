// The other end of a connection, as a comm's data path (tagged or rdma)
// addresses it.
#pragma once

#include <rdma/fabric.h>

#include <cstdint>
#include <string>

#include "core/peer_links.h"

namespace weft::ofi {

struct PathPeer {
  fi_addr_t address = FI_ADDR_UNSPEC;
  std::string name;
  uint32_t remote_comm_id = 0;  // the peer comm's id, for tags
  uint32_t local_comm_id = 0;
  PeerWatch* watch = nullptr;  // the comm's; null in tests without one

  // ncclRemoteError once the peer process or host is gone (peer_links.h):
  // each data path asks at the end of its progress().
  ncclResult_t check_alive(const std::string& device) const {
    return watch == nullptr ? ncclSuccess : watch->check(device, name);
  }
};

}  // namespace weft::ofi
