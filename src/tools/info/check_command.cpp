// weft-info --check: options, then the report on stdout.
#include <ostream>

#include "commands.h"
#include "node_check.h"

namespace weft::info {

int run_node_check(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  CheckOptions options;
  bool json = false;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--json") {
      json = true;
    } else if (args[i] == "--no-gpu") {
      options.gpu = false;
    } else if (args[i] == "--plugin" && i + 1 < args.size()) {
      options.plugin = args[++i];
    } else if (args[i] == "--sysfs-root" && i + 1 < args.size()) {
      options.sysfs_root = args[++i];
    } else {
      err << "weft-info --check: unknown or incomplete option '" << args[i]
          << "' (accepted: --json, --plugin PATH, --no-gpu, --sysfs-root DIR)\n";
      return 2;
    }
  }
  const NodeReport report = check_node(options);
  out << (json ? node_report_json(report) : node_report_text(report));
  return report.exit_status();
}

}  // namespace weft::info
