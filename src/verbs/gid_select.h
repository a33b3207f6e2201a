// Which GID of a RoCE port weft uses, as NCCL's IB transport chooses it:
// an explicit index (WEFT_IB_GID_INDEX / NCCL_IB_GID_INDEX), or a scan for
// a GID of the wanted RoCE version and address family, inside an address
// range when one is given, skipping empty and IPv6 link-local ones.
// InfiniBand ports use index 0 unless told otherwise.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace weft::verbs {

enum class GidType { Ib, RoceV1, RoceV2 };

struct GidEntry {
  int index = 0;
  uint8_t gid[16] = {};
  GidType type = GidType::RoceV2;
};

// An address range such as "10.1.0.0/16" or "fd00::/64".
struct Subnet {
  bool ipv4 = true;
  uint8_t address[16] = {};  // IPv4 in the first 4 bytes
  int prefix = 0;
};
bool parse_subnet(const std::string& text, Subnet* out, std::string* error);

struct GidPolicy {
  int index = -1;    // >= 0: use exactly this GID
  bool ipv4 = true;  // address family (NCCL_IB_ADDR_FAMILY AF_INET / AF_INET6)
  bool has_range = false;
  Subnet range;          // NCCL_IB_ADDR_RANGE
  int roce_version = 2;  // NCCL_IB_ROCE_VERSION_NUM
};

// The chosen index, or false with the reason and what to set in *error.
bool select_gid(const std::vector<GidEntry>& table, const GidPolicy& policy, int* index,
                std::string* error);

// "::ffff:10.0.0.1", "fe80::1" ... for logs.
std::string gid_text(const uint8_t gid[16]);

}  // namespace weft::verbs
