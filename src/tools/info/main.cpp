// weft-info: what weft sees on this machine and how it is configured.
#include <cstring>
#include <iostream>
#include <string>
#include <string_view>

#include "commands.h"

namespace {

struct Command {
  const char* flag;
  const char* help;
  int (*run)();
};

// One row per subcommand; a later one (--devices, ...) is one more row.
const Command kCommands[] = {
    {"--params", "print every WEFT_* parameter: type, default, current value, source, doc",
     [] { return weft::info::print_params(std::cout, std::cerr); }},
    {"--params-markdown", "print the configuration reference (docs/configuration.md)",
     [] { return weft::info::print_params_markdown(std::cout); }},
};

void usage(std::ostream& out) {
  out << "usage: weft-info <command>\n\ncommands:\n";
  for (const Command& command : kCommands) {
    out << "  " << command.flag << std::string(20 - std::strlen(command.flag), ' ') << command.help
        << "\n";
  }
  out << "  --help              print this help\n";
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    usage(std::cerr);
    return 2;
  }
  const std::string_view arg = argv[1];
  if (arg == "--help" || arg == "-h") {
    usage(std::cout);
    return 0;
  }
  for (const Command& command : kCommands) {
    if (arg == command.flag) {
      const int status = command.run();
      std::cout.flush();
      return std::cout.fail() ? 1 : status;
    }
  }
  std::cerr << "weft-info: unknown command '" << arg << "'\n";
  usage(std::cerr);
  return 2;
}
