// weft-info: what weft sees on this machine and how it is configured.
#include <cstring>
#include <iostream>
#include <string>
#include <string_view>
#include <vector>

#include "commands.h"

namespace {

using Args = std::vector<std::string>;

struct Command {
  const char* flag;
  const char* options;  // what may follow the flag, for the help
  const char* help;
  int (*run)(const Args& args);
};

int no_options(const char* flag, const Args& args) {
  if (args.empty()) return 0;
  std::cerr << "weft-info: " << flag << " takes no options (got '" << args[0] << "')\n";
  return 2;
}

// One row per subcommand.
const Command kCommands[] = {
    {"--check", "[--json] [--plugin PATH] [--no-gpu] [--sysfs-root DIR]",
     "check this node: the plugin as NCCL loads it, its devices, GPU registration, "
     "limits, versions, variables; exit 0 ready, 1 warnings, 2 not usable",
     [](const Args& args) { return weft::info::run_node_check(args, std::cout, std::cerr); }},
    {"--topo", "[-o FILE] [--shape auto|sysfs|list|NAME] [--sysfs-root DIR] [--cpuinfo FILE]",
     "write an NCCL topology file (NCCL_TOPO_FILE) placing the GPUs and weft's devices: from "
     "sysfs, or from the instance table where a VM hides which NIC is beside which GPU",
     [](const Args& args) { return weft::info::run_topology(args, std::cout, std::cerr); }},
    {"--params", "", "print every WEFT_* parameter: type, default, current value, source, doc",
     [](const Args& args) {
       if (int bad = no_options("--params", args)) return bad;
       return weft::info::print_params(std::cout, std::cerr);
     }},
    {"--params-markdown", "", "print the configuration reference (docs/configuration.md)",
     [](const Args& args) {
       if (int bad = no_options("--params-markdown", args)) return bad;
       return weft::info::print_params_markdown(std::cout);
     }},
};

void usage(std::ostream& out) {
  out << "usage: weft-info <command> [options]\n\ncommands:\n";
  for (const Command& command : kCommands) {
    out << "  " << command.flag;
    if (command.options[0] != '\0') out << " " << command.options;
    out << "\n      " << command.help << "\n";
  }
  out << "  --help\n      print this help\n";
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    usage(std::cerr);
    return 2;
  }
  const std::string_view arg = argv[1];
  if (arg == "--help" || arg == "-h") {
    usage(std::cout);
    return 0;
  }
  const Args rest(argv + 2, argv + argc);
  for (const Command& command : kCommands) {
    if (arg == command.flag) {
      const int status = command.run(rest);
      std::cout.flush();
      return std::cout.fail() ? 2 : status;
    }
  }
  std::cerr << "weft-info: unknown command '" << arg << "'\n";
  usage(std::cerr);
  return 2;
}
