#include "verbs/gid_select.h"

#include <arpa/inet.h>

#include <cstring>

namespace weft::verbs {
namespace {

bool all_zero(const uint8_t* bytes, size_t size) {
  for (size_t i = 0; i < size; ++i) {
    if (bytes[i] != 0) return false;
  }
  return true;
}

// ::ffff:a.b.c.d carries an IPv4 address.
bool ipv4_mapped(const uint8_t gid[16]) {
  static const uint8_t kPrefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  return std::memcmp(gid, kPrefix, sizeof(kPrefix)) == 0;
}

bool link_local(const uint8_t gid[16]) {
  return gid[0] == 0xfe && (gid[1] & 0xc0) == 0x80;
}

bool in_subnet(const uint8_t* address, const Subnet& subnet) {
  int bits = subnet.prefix;
  for (int i = 0; bits > 0; ++i, bits -= 8) {
    uint8_t mask = bits >= 8 ? 0xff : static_cast<uint8_t>(0xff << (8 - bits));
    if ((address[i] & mask) != (subnet.address[i] & mask)) return false;
  }
  return true;
}

const char* type_name(GidType type) {
  switch (type) {
    case GidType::Ib:
      return "IB";
    case GidType::RoceV1:
      return "RoCE v1";
    case GidType::RoceV2:
      return "RoCE v2";
  }
  return "?";
}

}  // namespace

std::string gid_text(const uint8_t gid[16]) {
  char text[INET6_ADDRSTRLEN] = "?";
  inet_ntop(AF_INET6, gid, text, sizeof(text));
  return text;
}

bool parse_subnet(const std::string& text, Subnet* out, std::string* error) {
  size_t slash = text.find('/');
  std::string address = text.substr(0, slash);
  Subnet subnet;
  subnet.ipv4 = address.find(':') == std::string::npos;
  int max_prefix = subnet.ipv4 ? 32 : 128;
  if (inet_pton(subnet.ipv4 ? AF_INET : AF_INET6, address.c_str(), subnet.address) != 1) {
    *error = "'" + text + "' is not an address range (e.g. 10.1.0.0/16 or fd00::/64)";
    return false;
  }
  subnet.prefix = max_prefix;
  if (slash != std::string::npos) {
    std::string prefix = text.substr(slash + 1);
    bool digits = !prefix.empty() && prefix.size() <= 3;
    for (char c : prefix) digits = digits && c >= '0' && c <= '9';
    if (!digits || std::stoi(prefix) > max_prefix) {
      *error = "'" + text + "' has a bad prefix length (0.." + std::to_string(max_prefix) + ")";
      return false;
    }
    subnet.prefix = std::stoi(prefix);
  }
  *out = subnet;
  return true;
}

bool select_gid(const std::vector<GidEntry>& table, const GidPolicy& policy, int* index,
                std::string* error) {
  if (policy.index >= 0) {
    for (const GidEntry& entry : table) {
      if (entry.index != policy.index) continue;
      if (all_zero(entry.gid, 16)) {
        *error = "GID index " + std::to_string(policy.index) + " (WEFT_IB_GID_INDEX) is empty";
        return false;
      }
      *index = entry.index;
      return true;
    }
    *error = "GID index " + std::to_string(policy.index) +
             " (WEFT_IB_GID_INDEX) is not in the port's table of " + std::to_string(table.size());
    return false;
  }
  bool infiniband = false;
  for (const GidEntry& entry : table) infiniband = infiniband || entry.type == GidType::Ib;
  GidType wanted = policy.roce_version == 1 ? GidType::RoceV1 : GidType::RoceV2;
  std::string seen;
  for (const GidEntry& entry : table) {
    if (all_zero(entry.gid, 16)) continue;
    seen += (seen.empty() ? "" : ", ") + std::to_string(entry.index) + ": " + gid_text(entry.gid) +
            " (" + type_name(entry.type) + ")";
    if (infiniband) {
      // The subnet prefix GID; routing uses LIDs.
      if (entry.type == GidType::Ib) {
        *index = entry.index;
        return true;
      }
      continue;
    }
    if (entry.type != wanted) continue;
    bool v4 = ipv4_mapped(entry.gid);
    if (v4 != policy.ipv4) continue;
    if (!v4 && link_local(entry.gid)) continue;  // not routable
    if (policy.has_range) {
      if (policy.range.ipv4 != v4) continue;
      if (!in_subnet(v4 ? entry.gid + 12 : entry.gid, policy.range)) continue;
    }
    *index = entry.index;
    return true;
  }
  *error = std::string("no ") + type_name(wanted) + " GID with an " +
           (policy.ipv4 ? "IPv4" : "IPv6") + " address" +
           (policy.has_range ? " inside WEFT_IB_ADDR_RANGE" : "") +
           " (GIDs: " + (seen.empty() ? "none" : seen) +
           "); set WEFT_IB_GID_INDEX, WEFT_IB_ADDR_FAMILY or WEFT_IB_ROCE_VERSION_NUM";
  return false;
}

}  // namespace weft::verbs
