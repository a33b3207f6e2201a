// The parameter table, parsed strictly from WEFT_* environment variables.
#include "weft/params.h"

#include <cstdlib>
#include <string_view>

#include "weft/param_parse.h"

namespace weft {
namespace {

constexpr ParamSpec kSpecs[] = {
#define WEFT_SPEC_PARAM(member, env, type, def, lo, hi, doc) \
  {#member, env, ParamType::type, def, nullptr, lo, hi, doc, nccl_equivalent(env)},
#define WEFT_SPEC_ENUM(member, env, def, choices, doc) \
  {#member, env, ParamType::Enum, def, choices, 0, 0, doc, nccl_equivalent(env)},
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

const char* nonempty(const char* value) {
  return (value != nullptr && value[0] != '\0') ? value : nullptr;
}

// Set but empty means "use the default", like unset. WEFT_ wins over NCCL_.
const char* env_value(const ParamSpec& spec, const EnvLookup& env) {
  if (!env) return nullptr;
  if (const char* value = nonempty(env(spec.env_name))) return value;
  return spec.nccl_env_name != nullptr ? nonempty(env(spec.nccl_env_name)) : nullptr;
}

template <typename T>
void load_one(const ParamSpec& spec, const EnvLookup& env, T& out, std::string& errors) {
  const char* value = env_value(spec, env);
  std::string error;
  if (parse_value(spec, value ? value : spec.default_value, out, error)) return;
  if (value == nullptr) error = "built-in default of " + error;  // a bug in the table
  if (value != nullptr && value != nonempty(env(spec.env_name))) {
    error += std::string(" (value taken from ") + spec.nccl_env_name + ", which " + spec.env_name +
             " would override)";
  }
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
  // NCCL's inverted switch for the same thing, honoured when WEFT_GDR_FLUSH is unset.
  const char* nccl_flush_disable = env ? nonempty(env("NCCL_GDR_FLUSH_DISABLE")) : nullptr;
  if (nccl_flush_disable != nullptr && std::atoi(nccl_flush_disable) != 0 &&
      (!env || nonempty(env("WEFT_GDR_FLUSH")) == nullptr)) {
    loaded.gdr_flush = "off";
  }
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
