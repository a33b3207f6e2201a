#include "topology/pci_tree.h"

#include <dirent.h>

#include <algorithm>
#include <cstdlib>

#include "core/sysfs.h"
#include "topology/pci_relation.h"

namespace weft {
namespace {

uint32_t read_hex(const std::string& file) {
  const std::string text = sysfs::read_line(file);
  return text.empty() ? 0 : static_cast<uint32_t>(std::strtoul(text.c_str(), nullptr, 16));
}

int read_int(const std::string& file, int fallback) {
  const std::string text = sysfs::read_line(file);
  if (text.empty()) return fallback;
  char* end = nullptr;
  const long value = std::strtol(text.c_str(), &end, 10);
  return end == text.c_str() ? fallback : static_cast<int>(value);
}

// The lower of two links, as NCCL takes it (device and upstream port).
void lower_link(PciFunction& function, const std::string& speed, int width) {
  if (!speed.empty() && pci_speed_gts(speed) > 0 &&
      (function.link_speed.empty() || pci_speed_gts(speed) < pci_speed_gts(function.link_speed))) {
    function.link_speed = speed;
  }
  if (width > 0 && (function.link_width == 0 || width < function.link_width)) {
    function.link_width = width;
  }
}

}  // namespace

bool PciFunction::is_nvidia_gpu() const {
  return vendor == 0x10de && (class_code >> 16) == 0x03;
}

double pci_speed_gts(const std::string& text) {
  char* end = nullptr;
  const double value = std::strtod(text.c_str(), &end);
  return end == text.c_str() || value <= 0 ? 0 : value;
}

PciTree PciTree::read(const std::string& sysfs_root) {
  PciTree tree;
  const std::string dir = sysfs_root + "/bus/pci/devices";
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return tree;
  std::vector<std::string> names;
  while (const dirent* entry = readdir(d)) {
    if (entry->d_name[0] != '.') names.push_back(entry->d_name);
  }
  closedir(d);
  std::sort(names.begin(), names.end());
  for (const std::string& name : names) {
    PciFunction function;
    function.bus_id = name;
    function.path = sysfs::realpath_of(dir + "/" + name);
    const std::vector<std::string> chain = pci_chain(function.path);
    if (chain.empty() || chain.back() != name) continue;  // not below a host bridge
    function.bridges.assign(chain.begin() + 1, chain.end() - 1);
    function.class_code = read_hex(function.path + "/class");
    function.vendor = read_hex(function.path + "/vendor");
    function.device = read_hex(function.path + "/device");
    function.subsystem_vendor = read_hex(function.path + "/subsystem_vendor");
    function.subsystem_device = read_hex(function.path + "/subsystem_device");
    const std::string speed = sysfs::read_line(function.path + "/max_link_speed");
    if (pci_speed_gts(speed) > 0) function.link_speed = speed;
    function.link_width = std::max(0, read_int(function.path + "/max_link_width", 0));
    if (!function.bridges.empty()) {
      const std::string upstream = function.path.substr(0, function.path.rfind('/'));
      lower_link(function, sysfs::read_line(upstream + "/max_link_speed"),
                 read_int(upstream + "/max_link_width", 0));
    }
    function.numa_node = read_int(function.path + "/numa_node", -1);
    tree.functions_.push_back(std::move(function));
  }
  return tree;
}

const PciFunction* PciTree::find(const std::string& bus_id) const {
  for (const PciFunction& function : functions_) {
    if (function.bus_id == bus_id) return &function;
  }
  return nullptr;
}

const PciFunction* PciTree::find_path(const std::string& path) const {
  const std::vector<std::string> chain = pci_chain(path);
  return chain.empty() ? nullptr : find(chain.back());
}

std::vector<const PciFunction*> PciTree::nvidia_gpus() const {
  std::vector<const PciFunction*> gpus;
  for (const PciFunction& function : functions_) {
    if (function.is_nvidia_gpu()) gpus.push_back(&function);
  }
  return gpus;
}

}  // namespace weft
