#include "verbs/hca_filter.h"

#include <cctype>

namespace weft::verbs {

bool HcaFilter::parse(const std::string& spec, HcaFilter* out, std::string* error) {
  HcaFilter filter;
  size_t pos = 0;
  // NCCL reads '^' then '=' (either may be absent).
  if (pos < spec.size() && spec[pos] == '^') {
    filter.exclude_ = true;
    ++pos;
  }
  if (pos < spec.size() && spec[pos] == '=') {
    filter.exact_ = true;
    ++pos;
  }
  if (pos == spec.size()) {
    if (pos > 0) {
      *error = "'" + spec + "' names no device after its ^ or =";
      return false;
    }
    *out = filter;
    return true;
  }
  while (pos <= spec.size()) {
    size_t comma = spec.find(',', pos);
    std::string item =
        spec.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    Entry entry;
    size_t colon = item.find(':');
    entry.name = item.substr(0, colon);
    if (entry.name.empty()) {
      *error = "empty device name in '" + spec + "' (entries are name[:port], comma-separated)";
      return false;
    }
    for (char c : entry.name) {
      if (std::isspace(static_cast<unsigned char>(c))) {
        *error = "device name '" + entry.name + "' in '" + spec + "' contains a space";
        return false;
      }
    }
    if (colon != std::string::npos) {
      std::string port = item.substr(colon + 1);
      bool digits = !port.empty() && port.size() <= 3;
      for (char c : port) digits = digits && std::isdigit(static_cast<unsigned char>(c));
      if (!digits || std::stoi(port) < 1 || std::stoi(port) > 255) {
        *error = "port '" + port + "' of " + entry.name + " in '" + spec +
                 "' is not a port number (1..255)";
        return false;
      }
      entry.port = std::stoi(port);
    }
    filter.entries_.push_back(entry);
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  *out = filter;
  return true;
}

bool HcaFilter::matches(const Entry& entry, const std::string& device, int port) const {
  bool name = exact_ ? device == entry.name : device.compare(0, entry.name.size(), entry.name) == 0;
  return name && (entry.port == 0 || entry.port == port);
}

bool HcaFilter::selects(const std::string& device, int port) const {
  if (entries_.empty()) return true;
  bool listed = false;
  for (const Entry& entry : entries_) listed = listed || matches(entry, device, port);
  return exclude_ ? !listed : listed;
}

}  // namespace weft::verbs
