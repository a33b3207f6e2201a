// Human-readable forms of parameter types and values.
#include "param_text.h"

#include "weft/param_parse.h"

namespace weft::info {
namespace {

[[maybe_unused]] std::string value_text(bool value) {  // no Bool in the table yet
  return value ? "true" : "false";
}
std::string value_text(int64_t value) {
  return std::to_string(value);
}
std::string value_text(uint64_t value) {
  return format_size(value);
}
std::string value_text(const std::string& value) {
  return value;
}

}  // namespace

const char* type_name(ParamType type) {
  switch (type) {
    case ParamType::Bool:
      return "bool";
    case ParamType::Int:
      return "int";
    case ParamType::Size:
      return "size";
    case ParamType::String:
      return "string";
    case ParamType::Enum:
      return "enum";
  }
  return "?";
}

std::string accepted_values(const ParamSpec& spec) {
  switch (spec.type) {
    case ParamType::Bool:
      return "0/1, true/false, yes/no, on/off";
    case ParamType::Int:
      return std::to_string(spec.min_value) + ".." + std::to_string(spec.max_value);
    case ParamType::Size:
      return format_size(static_cast<uint64_t>(spec.min_value)) + ".." +
             format_size(spec.max_value);
    case ParamType::String:
      return "any";
    case ParamType::Enum:
      return spec.choices;
  }
  return "?";
}

std::vector<std::string> param_values(const Params& params) {
  std::vector<std::string> values;
#define WEFT_PARAM_VALUE(member, ...) values.push_back(value_text(params.member));
  WEFT_PARAM_TABLE(WEFT_PARAM_VALUE, WEFT_PARAM_VALUE)
#undef WEFT_PARAM_VALUE
  return values;
}

std::string param_source(const ParamSpec& spec, const EnvLookup& env) {
  if (!param_is_set_in_env(spec, env)) return "default";
  const char* own = env(spec.env_name);
  if (own != nullptr && own[0] != '\0') return "env";
  return spec.nccl_env_name;
}

}  // namespace weft::info
