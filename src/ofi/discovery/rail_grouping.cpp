#include "ofi/discovery/rail_grouping.h"

#include <cctype>

namespace weft {

std::string pci_device_of(const std::string& pci_path) {
  size_t slash = pci_path.rfind('/');
  std::string last = slash == std::string::npos ? pci_path : pci_path.substr(slash + 1);
  // domain:bus:device.function, e.g. 0000:3b:00.1
  size_t dot = last.rfind('.');
  if (last.size() < 7 || dot == std::string::npos || dot + 1 >= last.size()) return "";
  for (size_t i = dot + 1; i < last.size(); ++i) {
    if (!std::isxdigit(static_cast<unsigned char>(last[i]))) return "";
  }
  if (last.find(':') == std::string::npos) return "";
  return pci_path.substr(0, pci_path.size() - (last.size() - dot));
}

std::vector<std::vector<int>> group_rails(const std::vector<RailCandidate>& candidates,
                                          RailGrouping grouping, int max_rails) {
  std::vector<std::vector<int>> groups;
  std::vector<std::string> keys;
  for (size_t i = 0; i < candidates.size(); ++i) {
    const RailCandidate& candidate = candidates[i];
    std::string key;
    if (grouping == RailGrouping::All) {
      key = candidate.fabric;
    } else if (grouping == RailGrouping::Pci) {
      std::string device = pci_device_of(candidate.pci_path);
      if (!device.empty()) key = candidate.fabric + "|" + device;
    }
    int found = -1;
    if (!key.empty()) {
      // The last group of this key, if it still has room.
      for (size_t g = groups.size(); g-- > 0;) {
        if (keys[g] == key) {
          if (static_cast<int>(groups[g].size()) < max_rails) found = static_cast<int>(g);
          break;
        }
      }
    }
    if (found < 0) {
      groups.push_back({});
      keys.push_back(key);
      found = static_cast<int>(groups.size()) - 1;
    }
    groups[found].push_back(static_cast<int>(i));
  }
  return groups;
}

}  // namespace weft
