// Strict parsing of single parameter values.
#include "weft/param_parse.h"

#include <cctype>
#include <charconv>
#include <limits>

namespace weft {
namespace {

bool equals_ignore_case(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(a[i])) !=
        std::tolower(static_cast<unsigned char>(b[i])))
      return false;
  }
  return true;
}

std::string quoted(const ParamSpec& spec, std::string_view text) {
  std::string s = spec.env_name;
  s += "=\"";
  s += text;
  s += '"';
  return s;
}

std::string int_range(const ParamSpec& spec) {
  return std::to_string(spec.min_value) + ".." + std::to_string(spec.max_value);
}

std::string size_range(const ParamSpec& spec) {
  return format_size(static_cast<uint64_t>(spec.min_value)) + ".." + format_size(spec.max_value);
}

// Returns the multiplier of a size suffix ("", "K", "MiB", "gb", "B", ...), 0 if invalid.
uint64_t size_multiplier(std::string_view suffix) {
  static constexpr std::string_view kUnits = "KMGT";
  uint64_t mult = 1;
  if (!suffix.empty()) {
    const auto unit =
        kUnits.find(static_cast<char>(std::toupper(static_cast<unsigned char>(suffix[0]))));
    if (unit != std::string_view::npos) {
      mult = uint64_t{1} << (10 * (unit + 1));
      suffix.remove_prefix(1);
      if (equals_ignore_case(suffix, "ib")) suffix = {};
    }
  }
  if (equals_ignore_case(suffix, "b")) suffix = {};
  return suffix.empty() ? mult : 0;
}

}  // namespace

// Largest exact binary unit: 1099511627776 -> "1T", 4097 -> "4097".
std::string format_size(uint64_t bytes) {
  static constexpr const char* kUnits[] = {"T", "G", "M", "K"};
  for (int i = 0; i < 4; ++i) {
    const uint64_t unit = uint64_t{1} << (10 * (4 - i));
    if (bytes != 0 && bytes % unit == 0) return std::to_string(bytes / unit) + kUnits[i];
  }
  return std::to_string(bytes);
}

bool parse_bool_param(const ParamSpec& spec, std::string_view text, bool& out, std::string& error) {
  static constexpr std::string_view kTrue[] = {"1", "true", "yes", "on"};
  static constexpr std::string_view kFalse[] = {"0", "false", "no", "off"};
  for (auto word : kTrue) {
    if (equals_ignore_case(text, word)) {
      out = true;
      return true;
    }
  }
  for (auto word : kFalse) {
    if (equals_ignore_case(text, word)) {
      out = false;
      return true;
    }
  }
  error = quoted(spec, text) + " is not a boolean (expected 0/1, true/false, yes/no or on/off)";
  return false;
}

bool parse_int_param(const ParamSpec& spec, std::string_view text, int64_t& out,
                     std::string& error) {
  std::string_view number = text;
  // from_chars takes a leading '-' but not '+'.
  if (number.size() > 1 && number[0] == '+' && number[1] != '-') number.remove_prefix(1);
  const char* last = number.data() + number.size();
  int64_t value = 0;
  const auto [end, ec] = std::from_chars(number.data(), last, value);
  if (end != last || ec == std::errc::invalid_argument) {
    error = quoted(spec, text) + " is not an integer (expected " + int_range(spec) + ")";
    return false;
  }
  // Beyond int64 is beyond [min, max] too.
  if (ec == std::errc::result_out_of_range || value < spec.min_value ||
      (value > 0 && static_cast<uint64_t>(value) > spec.max_value)) {
    error = quoted(spec, text) + " is out of range (expected " + int_range(spec) + ")";
    return false;
  }
  out = value;
  return true;
}

namespace {

enum class SizeText { kValid, kNotASize, kTooLarge };

SizeText read_size(std::string_view text, uint64_t* out) {
  size_t ndigits = 0;
  while (ndigits < text.size() && std::isdigit(static_cast<unsigned char>(text[ndigits])))
    ++ndigits;
  const uint64_t mult = size_multiplier(text.substr(ndigits));
  if (ndigits == 0 || mult == 0) return SizeText::kNotASize;
  uint64_t value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + ndigits, value);
  (void)end;
  if (ec == std::errc::result_out_of_range || value > std::numeric_limits<uint64_t>::max() / mult)
    return SizeText::kTooLarge;
  *out = value * mult;
  return SizeText::kValid;
}

}  // namespace

std::optional<uint64_t> parse_size(std::string_view text) {
  uint64_t value = 0;
  if (read_size(text, &value) != SizeText::kValid) return std::nullopt;
  return value;
}

bool parse_size_param(const ParamSpec& spec, std::string_view text, uint64_t& out,
                      std::string& error) {
  const std::string expected = " (expected " + size_range(spec) +
                               " bytes; suffixes K, M, G, T are powers of 1024, e.g. 4M or 4MiB)";
  uint64_t value = 0;
  switch (read_size(text, &value)) {
    case SizeText::kNotASize:
      error = quoted(spec, text) + " is not a size" + expected;
      return false;
    case SizeText::kTooLarge:
      error = quoted(spec, text) + " is too large" + expected;
      return false;
    case SizeText::kValid:
      break;
  }
  if (value < static_cast<uint64_t>(spec.min_value) || value > spec.max_value) {
    error = quoted(spec, text) + " is out of range" + expected;
    return false;
  }
  out = value;
  return true;
}

bool parse_enum_param(const ParamSpec& spec, std::string_view text, std::string& out,
                      std::string& error) {
  std::string_view rest = spec.choices;
  std::string listed;
  while (true) {
    const size_t bar = rest.find('|');
    const std::string_view choice = rest.substr(0, bar);
    if (equals_ignore_case(text, choice)) {
      out = choice;  // canonical spelling from the table
      return true;
    }
    if (!listed.empty()) listed += ", ";
    listed += choice;
    if (bar == std::string_view::npos) break;
    rest.remove_prefix(bar + 1);
  }
  error = quoted(spec, text) + " is not a valid choice (expected one of " + listed + ")";
  return false;
}

}  // namespace weft
