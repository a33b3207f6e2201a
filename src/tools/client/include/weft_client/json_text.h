// JSON text for the tools' machine-readable output (weft-perf --format json,
// weft-info --check --json): string escaping and a writer that places the
// commas and indentation, so each report states only its structure.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace weft {

// `s` as a JSON string literal, quotes included (control bytes escaped).
std::string json_string(const std::string& s);

// Builds one JSON document, two spaces per level. Keys are given before
// values inside objects; the writer checks nothing else.
class JsonWriter {
 public:
  JsonWriter& begin_object(const char* key = nullptr);
  JsonWriter& end_object();
  JsonWriter& begin_array(const char* key = nullptr);
  JsonWriter& end_array();
  JsonWriter& value(const char* key, const std::string& v);
  JsonWriter& value(const char* key, const char* v);
  JsonWriter& value(const char* key, int64_t v);
  JsonWriter& value(const char* key, uint64_t v);
  JsonWriter& value(const char* key, int v) { return value(key, static_cast<int64_t>(v)); }
  JsonWriter& value(const char* key, double v);
  JsonWriter& value(const char* key, bool v);
  JsonWriter& null(const char* key);
  // The document, with a final newline.
  std::string text() const { return out_ + "\n"; }

 private:
  void item(const char* key);
  void open(const char* key, char bracket);
  void close(char bracket);
  std::string out_;
  std::vector<bool> first_;  // per open level: nothing written in it yet
};

}  // namespace weft
