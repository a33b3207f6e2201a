// The parameter table, parsed strictly from WEFT_* environment variables.
#include "weft/params.h"

#include <cstdlib>
#include <string_view>

#include "weft/param_parse.h"

namespace weft {
namespace {

constexpr ParamSpec kSpecs[] = {
#define WEFT_SPEC_PARAM(member, env, type, def, lo, hi, doc) \
  {#member, env, ParamType::type, def, nullptr, lo, hi, doc},
#define WEFT_SPEC_ENUM(member, env, def, choices, doc) \
  {#member, env, ParamType::Enum, def, choices, 0, 0, doc},
    WEFT_PARAM_TABLE(WEFT_SPEC_PARAM, WEFT_SPEC_ENUM)
#undef WEFT_SPEC_PARAM
#undef WEFT_SPEC_ENUM
};

bool parse_value(const ParamSpec& spec, std::string_view text, bool& out, std::string& error) {
  return parse_bool_param(spec, text, out, error);
}
bool parse_value(const ParamSpec& spec, std::string_view text, int64_t& out, std::string& error) {
  return parse_int_param(spec, text, out, error);
}
bool parse_value(const ParamSpec& spec, std::string_view text, uint64_t& out, std::string& error) {
  return parse_size_param(spec, text, out, error);
}
bool parse_value(const ParamSpec& spec, std::string_view text, std::string& out,
                 std::string& error) {
  if (spec.type == ParamType::Enum) return parse_enum_param(spec, text, out, error);
  out = text;
  return true;
}

// Set but empty means "use the default", like unset.
const char* env_value(const ParamSpec& spec, const EnvLookup& env) {
  const char* value = env ? env(spec.env_name) : nullptr;
  return (value != nullptr && value[0] != '\0') ? value : nullptr;
}

template <typename T>
void load_one(const ParamSpec& spec, const EnvLookup& env, T& out, std::string& errors) {
  const char* value = env_value(spec, env);
  std::string error;
  if (parse_value(spec, value ? value : spec.default_value, out, error)) return;
  if (value == nullptr) error = "built-in default of " + error;  // a bug in the table
  if (!errors.empty()) errors += '\n';
  errors += error;
}

}  // namespace

std::span<const ParamSpec> param_specs() {
  return kSpecs;
}

bool load_params(Params& out, std::string& error, const EnvLookup& env) {
  Params loaded;
  std::string errors;
  size_t index = 0;
#define WEFT_LOAD_PARAM(member, ...) load_one(kSpecs[index++], env, loaded.member, errors);
  WEFT_PARAM_TABLE(WEFT_LOAD_PARAM, WEFT_LOAD_PARAM)
#undef WEFT_LOAD_PARAM
  if (!errors.empty()) {
    error = std::move(errors);
    return false;
  }
  out = std::move(loaded);
  return true;
}

bool load_params(Params& out, std::string& error) {
  return load_params(out, error, [](const char* name) { return std::getenv(name); });
}

bool param_is_set_in_env(const ParamSpec& spec, const EnvLookup& env) {
  return env_value(spec, env) != nullptr;
}

}  // namespace weft
