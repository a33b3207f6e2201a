#include "core/sysfs.h"

#include <climits>
#include <cstdio>
#include <cstdlib>
#include <fstream>

namespace weft::sysfs {

std::string read_line(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  while (!line.empty() && (line.back() == ' ' || line.back() == '\r' || line.back() == '\t')) {
    line.pop_back();
  }
  return line;
}

std::string realpath_of(const std::string& path) {
  char resolved[PATH_MAX];
  if (realpath(path.c_str(), resolved) == nullptr) return {};
  return resolved;
}

std::string pci_path(uint32_t domain, uint32_t bus, uint32_t device, uint32_t function) {
  char name[64];
  std::snprintf(name, sizeof(name), "/sys/bus/pci/devices/%04x:%02x:%02x.%x", domain, bus, device,
                function);
  return realpath_of(name);
}

std::string netdev_pci_path(const std::string& netdev) {
  if (netdev.empty() || netdev.find('/') != std::string::npos) return {};
  std::string device = realpath_of("/sys/class/net/" + netdev + "/device");
  if (device.find("/pci") == std::string::npos) return {};
  return device;
}

int netdev_speed_mbps(const std::string& netdev) {
  if (netdev.empty() || netdev.find('/') != std::string::npos) return 0;
  std::ifstream speed("/sys/class/net/" + netdev + "/speed");
  int mbps = 0;
  if (speed >> mbps && mbps > 0) return mbps;
  return 0;
}

}  // namespace weft::sysfs
