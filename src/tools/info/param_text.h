// How parameters are shown to people: type names, accepted values, values.
#pragma once

#include <string>
#include <vector>

#include "weft/params.h"

namespace weft::info {

// "bool", "int", "size", "string", "enum".
const char* type_name(ParamType type);

// What a value may be: "1..256", "0..1T", "auto|ofi|verbs", "0/1, ...", "any".
std::string accepted_values(const ParamSpec& spec);

// Where the current value came from: "env" (its WEFT_ name), the NCCL_*
// name that supplied it, or "default".
std::string param_source(const ParamSpec& spec, const EnvLookup& env);

// Current value of every parameter, in param_specs() order.
std::vector<std::string> param_values(const Params& params);

}  // namespace weft::info
