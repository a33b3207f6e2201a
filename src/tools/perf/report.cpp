#include "report.h"

#include "weft_client/json_text.h"

namespace weft::perf {

const std::string* fact(const Facts& facts, const char* key) {
  for (const auto& [k, v] : facts) {
    if (k == key) return &v;
  }
  return nullptr;
}

namespace {

bool same_step(const SizeResult& a, const SizeResult& b) {
  return a.test == b.test && a.size == b.size && a.group == b.group && a.pattern == b.pattern;
}

class TableReporter final : public Reporter {
 public:
  TableReporter(FILE* out, const Options& opts)
      : out_(out),
        checked_(opts.check),
        transfers_(opts.runs_transfers() || opts.runs_one_sided()) {}
  void begin_run(const std::string& label, const Facts& facts) override {
    fprintf(out_, "%s# weft-perf run %d: %s\n#", runs_ == 0 ? "" : "#\n", runs_ + 1, label.c_str());
    for (const auto& [k, v] : facts) fprintf(out_, "  %s: %s", k.c_str(), v.c_str());
    fprintf(out_, "\n");
    ++runs_;
    fflush(out_);
  }
  void section(const Pattern& pattern, const Options& opts) override {
    latency_ = pattern.kind() == TestKind::latency || is_one_sided_test(pattern.kind());
    grouped_ = pattern.kind() == TestKind::grouped;
    fprintf(out_, "#\n# %s\n", pattern.title(opts).c_str());
    if (pattern.kind() == TestKind::reg) {
      fprintf(out_, "# %12s %-7s %7s %11s %11s %11s %11s %11s\n", "size(B)", "pattern", "count",
              "regs/s", "min(us)", "median(us)", "avg(us)", "p99(us)");
    } else if (latency_) {
      fprintf(out_, "# %12s %9s %11s %11s %11s %11s %11s\n", "size(B)", "count", "min(us)",
              "median(us)", "avg(us)", "p99(us)", "bw(GB/s)");
    } else {
      fprintf(out_, "# %12s %4s %9s %11s %11s %11s\n", "size(B)", grouped_ ? "n" : "", "count",
              "time(us)", "bw(GB/s)", "Mmsg/s");
    }
    fflush(out_);
  }
  void row(const SizeResult& r) override {
    if (!r.pattern.empty()) {
      fprintf(out_, "  %12zu %-7s %7d %11.0f %11.2f %11.2f %11.2f %11.2f\n", r.size,
              r.pattern.c_str(), r.count, r.regs_per_s, r.min_us, r.median_us, r.avg_us, r.p99_us);
    } else if (r.has_latency) {
      fprintf(out_, "  %12zu %9d %11.2f %11.2f %11.2f %11.2f %11.3f\n", r.size, r.count, r.min_us,
              r.median_us, r.avg_us, r.p99_us, r.gbps);
    } else {
      std::string n = r.group > 0 ? std::to_string(r.group) : "";
      fprintf(out_, "  %12zu %4s %9d %11.2f %11.3f %11.4f\n", r.size, n.c_str(), r.count, r.time_us,
              r.gbps, r.mmsgs);
    }
    fflush(out_);
  }
  void end_run(const RunResult& run) override {
    const std::string* flushes = fact(run.totals, "flushes");
    const std::string* requests = fact(run.totals, "flush_requests");
    if (flushes != nullptr && requests != nullptr) {
      fprintf(out_,
              "#\n# GPU receives flushed (iflush, both ranks): %s, of which %s returned a "
              "request\n",
              flushes->c_str(), requests->c_str());
    }
    fflush(out_);
  }
  void comparison(const RunResult& plugin, const RunResult& raw) override {
    fprintf(out_, "#\n# comparison: %s / %s (ratio = plugin / raw; latency: median)\n",
            plugin.label.c_str(), raw.label.c_str());
    fprintf(out_, "# %-8s %12s %4s %12s %12s %8s %s\n", "test", "size(B)", "n", "plugin", "raw",
            "ratio", "unit");
    for (const Ratio& q : compare_runs(plugin, raw)) {
      std::string n = q.group > 0 ? std::to_string(q.group) : "";
      fprintf(out_, "  %-8s %12zu %4s %12.3f %12.3f %8.3f %s", q.test.c_str(), q.size, n.c_str(),
              q.plugin, q.raw, q.ratio, q.unit);
      if (std::string(q.unit) == "us") fprintf(out_, "  (%+.2f us)", q.plugin - q.raw);
      fprintf(out_, "\n");
    }
    fflush(out_);
  }
  void end() override {
    fprintf(out_, "#\n# received bytes verified: %s\n",
            !transfers_ ? "none (no transfer test)"
            : checked_  ? "all"
                        : "none (--no-check)");
    fflush(out_);
  }

 private:
  FILE* out_;
  bool checked_;
  bool transfers_;
  int runs_ = 0;
  bool latency_ = false;
  bool grouped_ = false;
};

class CsvReporter final : public Reporter {
 public:
  explicit CsvReporter(FILE* out) : out_(out) {}
  void begin_run(const std::string& label, const Facts& facts) override {
    label_ = label;
    fprintf(out_, "# label=%s", label.c_str());
    for (const auto& [k, v] : facts) fprintf(out_, " %s=%s", k.c_str(), v.c_str());
    fprintf(out_, "\n");
    if (!header_) {
      fprintf(out_,
              "label,test,size,group,count,time_us,bw_gbps,mmsgs,min_us,median_us,avg_us,p99_us,"
              "pattern,regs_per_s\n");
      header_ = true;
    }
    fflush(out_);
  }
  void section(const Pattern&, const Options&) override {}
  void row(const SizeResult& r) override {
    std::string group = r.group > 0 ? std::to_string(r.group) : "";
    fprintf(out_, "%s,%s,%zu,%s,%d,%.3f,%.4f,", csv_field(label_).c_str(), r.test.c_str(), r.size,
            group.c_str(), r.count, r.time_us, r.gbps);
    if (r.has_latency) {
      fprintf(out_, ",%.3f,%.3f,%.3f,%.3f,", r.min_us, r.median_us, r.avg_us, r.p99_us);
    } else {
      fprintf(out_, "%.5f,,,,,", r.mmsgs);
    }
    if (!r.pattern.empty()) {
      fprintf(out_, "%s,%.1f\n", r.pattern.c_str(), r.regs_per_s);
    } else {
      fprintf(out_, ",\n");
    }
    fflush(out_);
  }
  // Totals as a comment line in the "# label=..." style.
  void end_run(const RunResult& run) override {
    if (run.totals.empty()) return;
    fprintf(out_, "# label=%s", run.label.c_str());
    for (const auto& [k, v] : run.totals) fprintf(out_, " %s=%s", k.c_str(), v.c_str());
    fprintf(out_, "\n");
    fflush(out_);
  }
  // Comment lines, so the data rows keep one shape.
  void comparison(const RunResult& plugin, const RunResult& raw) override {
    fprintf(out_, "# comparison,test,size,group,plugin,raw,ratio,unit\n");
    for (const Ratio& q : compare_runs(plugin, raw)) {
      std::string n = q.group > 0 ? std::to_string(q.group) : "";
      fprintf(out_, "# comparison,%s,%zu,%s,%.4f,%.4f,%.4f,%s\n", q.test.c_str(), q.size, n.c_str(),
              q.plugin, q.raw, q.ratio, q.unit);
    }
    fflush(out_);
  }
  void end() override {}

 private:
  static std::string csv_field(const std::string& s) {
    if (s.find_first_of(",\"\n") == std::string::npos) return s;
    std::string out = "\"";
    for (char c : s) out += c == '"' ? std::string("\"\"") : std::string(1, c);
    return out + "\"";
  }

  FILE* out_;
  std::string label_;
  bool header_ = false;
};

// Integers (abi, depth, speed) stay numbers; everything else is a string.
std::string json_value(const std::string& v) {
  bool digits =
      !v.empty() && v.size() < 16 && v.find_first_not_of("0123456789") == std::string::npos;
  return digits ? v : json_string(v);
}

class JsonReporter final : public Reporter {
 public:
  explicit JsonReporter(FILE* out) : out_(out) {}
  void begin_run(const std::string& label, const Facts& facts) override {
    runs_.push_back(RunResult{label, facts, {}, {}});
  }
  void section(const Pattern&, const Options&) override {}
  void row(const SizeResult& r) override { runs_.back().rows.push_back(r); }
  void end_run(const RunResult& run) override { runs_.back().totals = run.totals; }
  void comparison(const RunResult& plugin, const RunResult& raw) override {
    ratios_ = compare_runs(plugin, raw);
  }
  void end() override {
    fprintf(out_, "{\n  \"tool\": \"weft-perf\",\n  \"format\": 2,\n  \"runs\": [");
    for (size_t i = 0; i < runs_.size(); ++i) write_run(runs_[i], i == 0);
    fprintf(out_, "\n  ]");
    if (!ratios_.empty()) {
      fprintf(out_, ",\n  \"comparison\": [");
      for (size_t i = 0; i < ratios_.size(); ++i) {
        const Ratio& q = ratios_[i];
        fprintf(out_,
                "%s\n    {\"test\": %s, \"size\": %zu, \"group\": %d, \"plugin\": %.4f, \"raw\": "
                "%.4f, \"ratio\": %.4f, \"unit\": %s}",
                i == 0 ? "" : ",", json_string(q.test).c_str(), q.size, q.group, q.plugin, q.raw,
                q.ratio, json_string(q.unit).c_str());
      }
      fprintf(out_, "\n  ]");
    }
    fprintf(out_, "\n}\n");
    fflush(out_);
  }

 private:
  void write_run(const RunResult& run, bool first) {
    fprintf(out_, "%s\n    {\"label\": %s", first ? "" : ",", json_string(run.label).c_str());
    for (const auto& [k, v] : run.facts) {
      fprintf(out_, ", %s: %s", json_string(k).c_str(), json_value(v).c_str());
    }
    for (const auto& [k, v] : run.totals) {
      fprintf(out_, ", %s: %s", json_string(k).c_str(), json_value(v).c_str());
    }
    fprintf(out_, ",\n     \"results\": [");
    for (size_t i = 0; i < run.rows.size(); ++i) {
      const SizeResult& r = run.rows[i];
      fprintf(out_,
              "%s\n       {\"test\": %s, \"size\": %zu, \"count\": %d, \"time_us\": %.3f, "
              "\"bw_gbps\": %.4f",
              i == 0 ? "" : ",", json_string(r.test).c_str(), r.size, r.count, r.time_us, r.gbps);
      if (r.group > 0) fprintf(out_, ", \"group\": %d", r.group);
      if (!r.pattern.empty()) {
        fprintf(out_, ", \"pattern\": %s, \"regs_per_s\": %.1f", json_string(r.pattern).c_str(),
                r.regs_per_s);
      }
      if (r.has_latency) {
        fprintf(out_, ", \"min_us\": %.3f, \"median_us\": %.3f, \"avg_us\": %.3f, \"p99_us\": %.3f",
                r.min_us, r.median_us, r.avg_us, r.p99_us);
      } else {
        fprintf(out_, ", \"mmsgs\": %.5f", r.mmsgs);
      }
      fprintf(out_, "}");
    }
    fprintf(out_, "\n     ]}");
  }

  FILE* out_;
  std::vector<RunResult> runs_;
  std::vector<Ratio> ratios_;
};

}  // namespace

std::vector<Ratio> compare_runs(const RunResult& plugin, const RunResult& raw) {
  std::vector<Ratio> out;
  for (const SizeResult& p : plugin.rows) {
    for (const SizeResult& r : raw.rows) {
      if (!same_step(p, r)) continue;
      Ratio q{p.test, p.size, p.group, "GB/s", p.gbps, r.gbps, 0};
      if (p.test == "latency" || p.test == "signal") {
        q.unit = "us";
        q.plugin = p.median_us;
        q.raw = r.median_us;
      } else if (p.test == "rate") {
        q.unit = "Mmsg/s";
        q.plugin = p.mmsgs;
        q.raw = r.mmsgs;
      }
      q.ratio = q.raw > 0 ? q.plugin / q.raw : 0;
      out.push_back(q);
      if (p.test == "put" || p.test == "get") {
        // Their rows carry both: bandwidth above, one operation's latency here.
        Ratio lat{p.test + "-lat", p.size, p.group, "us", p.median_us, r.median_us, 0};
        lat.ratio = lat.raw > 0 ? lat.plugin / lat.raw : 0;
        out.push_back(lat);
      }
      break;
    }
  }
  return out;
}

std::unique_ptr<Reporter> make_reporter(OutputFormat format, FILE* out, const Options& opts) {
  switch (format) {
    case OutputFormat::csv:
      return std::make_unique<CsvReporter>(out);
    case OutputFormat::json:
      return std::make_unique<JsonReporter>(out);
    case OutputFormat::table:
      break;
  }
  return std::make_unique<TableReporter>(out, opts);
}

}  // namespace weft::perf
