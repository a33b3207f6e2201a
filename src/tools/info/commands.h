// weft-info's subcommands. Each returns the process exit status:
// 0 success, 1 failure, 2 bad usage or bad configuration.
#pragma once

#include <iosfwd>

namespace weft::info {

// --params: every parameter with its default, current value and source.
int print_params(std::ostream& out, std::ostream& err);

// --params-markdown: docs/configuration.md (independent of the environment).
int print_params_markdown(std::ostream& out);

}  // namespace weft::info
