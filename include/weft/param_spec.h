// What one parameter is: name, type, default, bounds, doc. Shared by the
// table loader, the value parsers and the tools that print the table.
#pragma once

#include <cstdint>
#include <span>

namespace weft {

enum class ParamType { Bool, Int, Size, String, Enum };

struct ParamSpec {
  const char* member;
  const char* env_name;
  ParamType type;
  const char* default_value;
  const char* choices;  // "a|b|c" for Enum, nullptr otherwise
  int64_t min_value;    // Int and Size only
  uint64_t max_value;   // Int and Size only
  const char* doc;
  // NCCL's variable of the same meaning, read when the WEFT_ one is unset
  // (operators already set NCCL_IB_HCA & co.); nullptr when none.
  const char* nccl_env_name;
};

// NCCL_IB_HCA for WEFT_IB_HCA and so on; nullptr for weft's own variables.
constexpr const char* nccl_equivalent(const char* env_name) {
  constexpr const char* kPairs[][2] = {
      {"WEFT_IB_HCA", "NCCL_IB_HCA"},
      {"WEFT_IB_GID_INDEX", "NCCL_IB_GID_INDEX"},
      {"WEFT_IB_ADDR_FAMILY", "NCCL_IB_ADDR_FAMILY"},
      {"WEFT_IB_ADDR_RANGE", "NCCL_IB_ADDR_RANGE"},
      {"WEFT_IB_ROCE_VERSION_NUM", "NCCL_IB_ROCE_VERSION_NUM"},
      {"WEFT_IB_TC", "NCCL_IB_TC"},
      {"WEFT_IB_SL", "NCCL_IB_SL"},
      {"WEFT_IB_TIMEOUT", "NCCL_IB_TIMEOUT"},
      {"WEFT_IB_RETRY_CNT", "NCCL_IB_RETRY_CNT"},
      {"WEFT_IB_QPS_PER_CONNECTION", "NCCL_IB_QPS_PER_CONNECTION"},
      {"WEFT_IB_SPLIT_DATA_ON_QPS", "NCCL_IB_SPLIT_DATA_ON_QPS"},
      {"WEFT_IB_ADAPTIVE_ROUTING", "NCCL_IB_ADAPTIVE_ROUTING"},
      {"WEFT_IB_AR_THRESHOLD", "NCCL_IB_AR_THRESHOLD"},
      {"WEFT_IB_PKEY", "NCCL_IB_PKEY"},
      {"WEFT_IB_USE_INLINE", "NCCL_IB_USE_INLINE"},
      {"WEFT_IB_ECE_ENABLE", "NCCL_IB_ECE_ENABLE"},
      {"WEFT_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME"},
  };
  for (const auto& pair : kPairs) {
    const char* a = pair[0];
    const char* b = env_name;
    while (*a != '\0' && *a == *b) {
      ++a;
      ++b;
    }
    if (*a == *b) return pair[1];
  }
  return nullptr;
}

// Every parameter, in table order.
std::span<const ParamSpec> param_specs();

}  // namespace weft
