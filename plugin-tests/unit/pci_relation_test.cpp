#include "topology/pci_relation.h"

#include <catch2/catch.hpp>

using weft::pci_relation;

namespace {
const std::string kRoot = "/sys/devices/pci0000:00";
}

TEST_CASE("pci_relation: devices under the same switch port are nearest", "[pci]") {
  // Root port 00:01.0, a switch (upstream 01:00.0, downstream 02:00.0 and
  // 02:01.0), a GPU and a NIC on each downstream port.
  const std::string sw = kRoot + "/0000:00:01.0/0000:01:00.0";
  const std::string gpu = sw + "/0000:02:00.0/0000:03:00.0";
  const std::string nic_same_port = sw + "/0000:02:00.0/0000:03:00.1";
  const std::string nic_other_port = sw + "/0000:02:01.0/0000:04:00.0";
  const std::string nic_other_root_port = kRoot + "/0000:00:02.0/0000:05:00.0";

  auto same_port = pci_relation(gpu, nic_same_port);
  CHECK(same_port.pci);
  CHECK(same_port.same_root);
  CHECK(same_port.shared_bridges == 3);
  CHECK(same_port.hops == 0);
  CHECK(same_port.describe() == "under the same PCI bridge");

  auto other_port = pci_relation(gpu, nic_other_port);
  CHECK(other_port.shared_bridges == 2);
  CHECK(other_port.hops == 2);
  CHECK(other_port.describe() == "2 hops below a shared PCI bridge");

  auto other_root_port = pci_relation(gpu, nic_other_root_port);
  CHECK(other_root_port.same_root);
  CHECK(other_root_port.shared_bridges == 0);
  CHECK(other_root_port.hops == 4);
  CHECK(other_root_port.describe() == "same host bridge, 4 hops");

  CHECK(same_port.nearer_than(other_port));
  CHECK(other_port.nearer_than(other_root_port));
  CHECK_FALSE(other_root_port.nearer_than(same_port));
}

TEST_CASE("pci_relation: host bridges, non-PCI paths and files below a function", "[pci]") {
  const std::string gpu = kRoot + "/0000:00:01.0/0000:01:00.0";
  auto other_root = pci_relation(gpu, "/sys/devices/pci0000:80/0000:80:01.0/0000:81:00.0");
  CHECK(other_root.pci);
  CHECK_FALSE(other_root.same_root);
  CHECK(other_root.hops == -1);
  CHECK(other_root.describe() == "different host bridges");

  auto virtual_nic = pci_relation(gpu, "/sys/devices/virtual/net/veth0");
  CHECK_FALSE(virtual_nic.pci);
  CHECK(virtual_nic.describe() == "not PCI devices");
  CHECK(other_root.nearer_than(virtual_nic));

  // A path into the function's own files ends at the function.
  auto netdev = pci_relation(gpu, kRoot + "/0000:00:01.0/0000:01:00.1/net/eth0");
  CHECK(netdev.shared_bridges == 1);
  CHECK(netdev.hops == 0);
  // A fake sysfs tree below another directory reads the same.
  auto rooted = pci_relation("/tmp/x" + gpu, "/tmp/x" + kRoot + "/0000:00:01.0/0000:01:00.1");
  CHECK(rooted.same_root);
  CHECK(rooted.hops == 0);
}
