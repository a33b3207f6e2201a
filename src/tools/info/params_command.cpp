// weft-info --params: the parameter table with current values.
#include <algorithm>
#include <cstdlib>
#include <ostream>
#include <string>
#include <vector>

#include "commands.h"
#include "param_text.h"
#include "weft/params.h"

namespace weft::info {
namespace {

std::string shown(const std::string& value) {
  return value.empty() ? "(empty)" : value;
}

}  // namespace

int print_params(std::ostream& out, std::ostream& err) {
  Params params;
  std::string error;
  if (!load_params(params, error)) {
    err << "weft-info: invalid configuration:\n" << error << "\n";
    return 2;
  }
  const EnvLookup env = [](const char* name) { return std::getenv(name); };
  const auto specs = param_specs();
  const std::vector<std::string> values = param_values(params);

  std::vector<std::vector<std::string>> rows;
  rows.push_back({"NAME", "TYPE", "DEFAULT", "VALUE", "SOURCE", "ACCEPTED"});
  for (size_t i = 0; i < specs.size(); ++i) {
    rows.push_back({specs[i].env_name, type_name(specs[i].type), shown(specs[i].default_value),
                    shown(values[i]), param_source(specs[i], env), accepted_values(specs[i])});
  }
  std::vector<size_t> widths(rows[0].size(), 0);
  for (const auto& row : rows) {
    for (size_t c = 0; c < row.size(); ++c) widths[c] = std::max(widths[c], row[c].size());
  }
  for (size_t r = 0; r < rows.size(); ++r) {
    std::string line;
    for (size_t c = 0; c < rows[r].size(); ++c) {
      line += rows[r][c];
      if (c + 1 < rows[r].size()) line += std::string(widths[c] - rows[r][c].size() + 2, ' ');
    }
    out << line << "\n";
    if (r > 0) out << "    " << specs[r - 1].doc << "\n";
  }
  return 0;
}

}  // namespace weft::info
