// The environment softverbs is configured by, and its optional log.

#include "env.h"

#include <unistd.h>

#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <sstream>

namespace softverbs {

long env_long(const char* name, long fallback) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return fallback;
  char* end = nullptr;
  long x = std::strtol(v, &end, 0);
  return (end == nullptr || *end != '\0') ? fallback : x;
}

std::string env_string(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return (v == nullptr || *v == '\0') ? fallback : std::string(v);
}

std::vector<std::string> split(const std::string& text, char separator) {
  std::vector<std::string> out;
  std::string item;
  std::istringstream in(text);
  while (std::getline(in, item, separator)) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

namespace {

void write_line(const char* format, va_list ap) {
  char line[512];
  std::vsnprintf(line, sizeof(line), format, ap);
  std::fprintf(stderr, "softverbs[%d]: %s\n", static_cast<int>(getpid()), line);
}

}  // namespace

void log(const char* format, ...) {
  static const bool on = env_long("SOFTVERBS_LOG", 0) != 0;
  if (!on) return;
  va_list ap;
  va_start(ap, format);
  write_line(format, ap);
  va_end(ap);
}

void trace(const char* format, ...) {
  static const bool on = env_long("SOFTVERBS_LOG", 0) >= 2;
  if (!on) return;
  va_list ap;
  va_start(ap, format);
  write_line(format, ap);
  va_end(ap);
}

}  // namespace softverbs
