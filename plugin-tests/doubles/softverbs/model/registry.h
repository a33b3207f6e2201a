// The QP registry: one entry per QP of every process sharing the registry
// directory, so that a QP number leads to its owner's NIC and ports. The
// entry qp-<qpn> is a symbolic link to a file that describes the owner's
// NIC and device (<nic socket>.info-<k>, written once per process, NIC and
// device): a QP costs one symlink, one readlink per lookup and one unlink,
// and each description is read once per reading process.
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
// Removes the descriptions written for the NIC at `nic_path` (its QPs are
// gone): called when that NIC stops.
void registry_forget_nic(const std::string& nic_path);
bool registry_read_qp(uint32_t qpn, RemoteQp* out);
// Removes files of processes that no longer exist.
void registry_reclaim();

}  // namespace softverbs
