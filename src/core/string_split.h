// Splitting lists in variables and names ("tcp,shm", "a;b"): the non-empty
// parts, in order.
#pragma once

#include <sstream>
#include <string>
#include <vector>

namespace weft {

inline std::vector<std::string> split(const std::string& text, char separator) {
  std::vector<std::string> parts;
  std::stringstream stream(text);
  std::string part;
  while (std::getline(stream, part, separator)) {
    if (!part.empty()) parts.push_back(part);
  }
  return parts;
}

}  // namespace weft
