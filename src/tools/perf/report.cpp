#include "report.h"

namespace weft::perf {
namespace {

class TableReporter final : public Reporter {
 public:
  explicit TableReporter(FILE* out) : out_(out) {}
  void begin(const Facts& facts) override {
    fprintf(out_, "# weft-perf");
    for (const auto& [k, v] : facts) fprintf(out_, "  %s: %s", k.c_str(), v.c_str());
    fprintf(out_, "\n");
    fflush(out_);
  }
  void section(const Pattern& pattern, const Options& opts) override {
    latency_ = std::string(pattern.name()) == "latency";
    checked_ = opts.check;
    fprintf(out_, "#\n# %s", pattern.title());
    if (!latency_) fprintf(out_, ", %d requests in flight", opts.depth);
    fprintf(out_, "\n");
    if (latency_) {
      fprintf(out_, "# %12s %9s %11s %11s %11s %11s %11s\n", "size(B)", "count", "min(us)",
              "median(us)", "avg(us)", "p99(us)", "bw(GB/s)");
    } else {
      fprintf(out_, "# %12s %9s %11s %11s\n", "size(B)", "count", "time(us)", "bw(GB/s)");
    }
    fflush(out_);
  }
  void row(const SizeResult& r) override {
    if (r.has_latency) {
      fprintf(out_, "  %12zu %9d %11.2f %11.2f %11.2f %11.2f %11.3f\n", r.size, r.count, r.min_us,
              r.median_us, r.avg_us, r.p99_us, r.gbps);
    } else {
      fprintf(out_, "  %12zu %9d %11.2f %11.3f\n", r.size, r.count, r.time_us, r.gbps);
    }
    fflush(out_);
  }
  void end() override {
    fprintf(out_, "#\n# received bytes verified: %s\n", checked_ ? "all" : "none (--no-check)");
    fflush(out_);
  }

 private:
  FILE* out_;
  bool latency_ = false;
  bool checked_ = true;
};

class CsvReporter final : public Reporter {
 public:
  explicit CsvReporter(FILE* out) : out_(out) {}
  void begin(const Facts& facts) override {
    fprintf(out_, "#");
    for (const auto& [k, v] : facts) fprintf(out_, " %s=%s", k.c_str(), v.c_str());
    fprintf(out_, "\ntest,size,count,time_us,bw_gbps,min_us,median_us,avg_us,p99_us\n");
    fflush(out_);
  }
  void section(const Pattern&, const Options&) override {}
  void row(const SizeResult& r) override {
    if (r.has_latency) {
      fprintf(out_, "%s,%zu,%d,%.3f,%.4f,%.3f,%.3f,%.3f,%.3f\n", r.test.c_str(), r.size, r.count,
              r.time_us, r.gbps, r.min_us, r.median_us, r.avg_us, r.p99_us);
    } else {
      fprintf(out_, "%s,%zu,%d,%.3f,%.4f,,,,\n", r.test.c_str(), r.size, r.count, r.time_us,
              r.gbps);
    }
    fflush(out_);
  }
  void end() override {}

 private:
  FILE* out_;
};

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
          snprintf(buf, sizeof(buf), "\\u%04x", c);
          out += buf;
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}

// Integers (abi, depth, speed) stay numbers; everything else is a string.
std::string json_value(const std::string& v) {
  bool digits =
      !v.empty() && v.size() < 16 && v.find_first_not_of("0123456789") == std::string::npos;
  return digits ? v : json_string(v);
}

class JsonReporter final : public Reporter {
 public:
  explicit JsonReporter(FILE* out) : out_(out) {}
  void begin(const Facts& facts) override { facts_ = facts; }
  void section(const Pattern&, const Options&) override {}
  void row(const SizeResult& r) override { rows_.push_back(r); }
  void end() override {
    fprintf(out_, "{\n  \"tool\": \"weft-perf\"");
    for (const auto& [k, v] : facts_) {
      fprintf(out_, ",\n  %s: %s", json_string(k).c_str(), json_value(v).c_str());
    }
    fprintf(out_, ",\n  \"results\": [");
    for (size_t i = 0; i < rows_.size(); ++i) {
      const SizeResult& r = rows_[i];
      fprintf(out_,
              "%s\n    {\"test\": %s, \"size\": %zu, \"count\": %d, \"time_us\": %.3f, "
              "\"bw_gbps\": %.4f",
              i == 0 ? "" : ",", json_string(r.test).c_str(), r.size, r.count, r.time_us, r.gbps);
      if (r.has_latency) {
        fprintf(out_, ", \"min_us\": %.3f, \"median_us\": %.3f, \"avg_us\": %.3f, \"p99_us\": %.3f",
                r.min_us, r.median_us, r.avg_us, r.p99_us);
      }
      fprintf(out_, "}");
    }
    fprintf(out_, "\n  ]\n}\n");
    fflush(out_);
  }

 private:
  FILE* out_;
  Facts facts_;
  std::vector<SizeResult> rows_;
};

}  // namespace

std::unique_ptr<Reporter> make_reporter(OutputFormat format, FILE* out) {
  switch (format) {
    case OutputFormat::csv:
      return std::make_unique<CsvReporter>(out);
    case OutputFormat::json:
      return std::make_unique<JsonReporter>(out);
    case OutputFormat::table:
      break;
  }
  return std::make_unique<TableReporter>(out);
}

}  // namespace weft::perf
