#include "weft_client/json_text.h"

#include <cmath>
#include <cstdio>

namespace weft {

std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04x", c);
          out += buf;
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}

void JsonWriter::item(const char* key) {
  if (!first_.empty()) {
    out_ += first_.back() ? "\n" : ",\n";
    first_.back() = false;
    out_.append(2 * first_.size(), ' ');
  }
  if (key != nullptr) out_ += json_string(key) + ": ";
}

void JsonWriter::open(const char* key, char bracket) {
  item(key);
  out_ += bracket;
  first_.push_back(true);
}

void JsonWriter::close(char bracket) {
  const bool empty = first_.back();
  first_.pop_back();
  if (!empty) {
    out_ += "\n";
    out_.append(2 * first_.size(), ' ');
  }
  out_ += bracket;
}

JsonWriter& JsonWriter::begin_object(const char* key) {
  open(key, '{');
  return *this;
}

JsonWriter& JsonWriter::end_object() {
  close('}');
  return *this;
}

JsonWriter& JsonWriter::begin_array(const char* key) {
  open(key, '[');
  return *this;
}

JsonWriter& JsonWriter::end_array() {
  close(']');
  return *this;
}

JsonWriter& JsonWriter::value(const char* key, const std::string& v) {
  item(key);
  out_ += json_string(v);
  return *this;
}

JsonWriter& JsonWriter::value(const char* key, const char* v) {
  return v == nullptr ? null(key) : value(key, std::string(v));
}

JsonWriter& JsonWriter::value(const char* key, int64_t v) {
  item(key);
  out_ += std::to_string(v);
  return *this;
}

JsonWriter& JsonWriter::value(const char* key, uint64_t v) {
  item(key);
  out_ += std::to_string(v);
  return *this;
}

JsonWriter& JsonWriter::value(const char* key, double v) {
  if (!std::isfinite(v)) return null(key);
  item(key);
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.6g", v);
  out_ += buf;
  return *this;
}

JsonWriter& JsonWriter::value(const char* key, bool v) {
  item(key);
  out_ += v ? "true" : "false";
  return *this;
}

JsonWriter& JsonWriter::null(const char* key) {
  item(key);
  out_ += "null";
  return *this;
}

}  // namespace weft
