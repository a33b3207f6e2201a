// Typed view of the parameter table, read from the environment.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "weft/param_spec.h"
#include "weft/param_table.h"

namespace weft {

struct Params {
#define WEFT_PARAM_FIELD_Bool bool
#define WEFT_PARAM_FIELD_Int int64_t
#define WEFT_PARAM_FIELD_Size uint64_t
#define WEFT_PARAM_FIELD_String std::string
#define WEFT_DECLARE_PARAM(member, env, type, def, lo, hi, doc) WEFT_PARAM_FIELD_##type member{};
#define WEFT_DECLARE_ENUM(member, env, def, choices, doc) std::string member{};
  WEFT_PARAM_TABLE(WEFT_DECLARE_PARAM, WEFT_DECLARE_ENUM)
#undef WEFT_DECLARE_PARAM
#undef WEFT_DECLARE_ENUM
};

// Returns the value of an environment variable or nullptr.
using EnvLookup = std::function<const char*(const char*)>;

// Fills `out` from defaults and the environment. On a malformed value returns
// false and sets `error` to a message naming the variable, the value and
// what is accepted. Bool accepts 0/1/true/false/yes/no/on/off; Size accepts
// suffixes K, M, G, T (powers of 1024); Int/Size reject trailing garbage and
// values outside [min, max].
bool load_params(Params& out, std::string& error, const EnvLookup& env);
bool load_params(Params& out, std::string& error);  // from getenv

// Where a parameter's current value came from, for weft-info.
bool param_is_set_in_env(const ParamSpec& spec, const EnvLookup& env);

}  // namespace weft
