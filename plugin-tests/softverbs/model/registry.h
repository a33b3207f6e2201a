// The QP registry: one file per QP of every process sharing the registry
// directory, so that a QP number leads to its owner's NIC and ports.
#pragma once

#include <infiniband/verbs.h>
#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "device.h"

namespace softverbs {

struct RemotePort {
  int port = 0;
  uint16_t lid = 0;
  std::vector<ibv_gid> gids;
};

struct RemoteQp {
  pid_t pid = 0;
  std::string nic;
  bool ib = false;
  std::vector<RemotePort> ports;
};

// Creates qp-<qpn> for a new QP of `device` and returns the qpn (0 when none
// could be allocated).
uint32_t registry_create_qp(const std::string& nic_path, const DeviceInfo& device);
void registry_remove_qp(uint32_t qpn);
bool registry_read_qp(uint32_t qpn, RemoteQp* out);
// Removes files of processes that no longer exist.
void registry_reclaim();

}  // namespace softverbs
