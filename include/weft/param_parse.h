// Strict parsers for one parameter value, shared by the parameter table
// loader, weft-info and the tests. Each returns false and sets `error` to a
// message naming the variable, the value and what is accepted.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "weft/param_spec.h"

namespace weft {

// 0/1, true/false, yes/no, on/off, case-insensitive.
bool parse_bool_param(const ParamSpec& spec, std::string_view text, bool& out, std::string& error);

// Decimal, optional sign, nothing after the digits, within [min, max].
bool parse_int_param(const ParamSpec& spec, std::string_view text, int64_t& out,
                     std::string& error);

// Non-negative integer with an optional K/M/G/T suffix (powers of 1024) and
// an optional B or iB ("4M", "4MiB", "4096B"), within [min, max].
bool parse_size_param(const ParamSpec& spec, std::string_view text, uint64_t& out,
                      std::string& error);

// The same without a range or a parameter to name: the bytes, or nothing
// when `text` is not a size or does not fit in 64 bits (weft-perf's options).
std::optional<uint64_t> parse_size(std::string_view text);

// One of spec.choices, case-insensitive; `out` gets the table's spelling.
bool parse_enum_param(const ParamSpec& spec, std::string_view text, std::string& out,
                      std::string& error);

// Bytes with the largest exact binary unit: 1099511627776 -> "1T", 4097 -> "4097".
std::string format_size(uint64_t bytes);

}  // namespace weft
