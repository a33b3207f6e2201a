// Which NICs form one device: ports of one card under pci, everything of a
// fabric under all, nothing under off, never more than the rail limit.
#include "ofi/discovery/rail_grouping.h"

#include <catch2/catch.hpp>

using namespace weft;

namespace {

const std::vector<RailCandidate> kNics = {
    {"efa", "/sys/devices/pci0000:00/0000:00:01.0/0000:3b:00.0"},
    {"efa", "/sys/devices/pci0000:00/0000:00:01.0/0000:3b:00.1"},  // port 2 of the same card
    {"efa", "/sys/devices/pci0000:80/0000:80:01.0/0000:ab:00.0"},  // another card
    {"efa", ""},                                                   // virtual, no PCI device
    {"tcp", "/sys/devices/pci0000:00/0000:00:01.0/0000:3b:00.1"},  // other fabric
};

}  // namespace

TEST_CASE("PCI device of a function path", "[unit][rails]") {
  CHECK(pci_device_of("/sys/devices/pci0000:00/0000:3b:00.1") ==
        "/sys/devices/pci0000:00/0000:3b:00");
  CHECK(pci_device_of("").empty());
  CHECK(pci_device_of("/sys/devices/virtual/net/lo").empty());
  CHECK(pci_device_of("/sys/devices/pci0000:00/0000:3b:00.x").empty());
}

TEST_CASE("rail grouping by PCI locality, all, or off", "[unit][rails]") {
  using Groups = std::vector<std::vector<int>>;
  CHECK(group_rails(kNics, RailGrouping::Pci, 8) == Groups{{0, 1}, {2}, {3}, {4}});
  CHECK(group_rails(kNics, RailGrouping::Off, 8) == Groups{{0}, {1}, {2}, {3}, {4}});
  CHECK(group_rails(kNics, RailGrouping::All, 8) == Groups{{0, 1, 2, 3}, {4}});
  // The limit splits a fabric's NICs in order.
  CHECK(group_rails(kNics, RailGrouping::All, 3) == Groups{{0, 1, 2}, {3}, {4}});
  CHECK(group_rails({}, RailGrouping::Pci, 8).empty());
}
