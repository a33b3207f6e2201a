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
};

// Every parameter, in table order.
std::span<const ParamSpec> param_specs();

}  // namespace weft
