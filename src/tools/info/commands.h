// weft-info's subcommands. Each returns the process exit status:
// 0 success, 1 failure (--check: warnings), 2 bad usage or bad
// configuration (--check: the node is not usable).
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

namespace weft::info {

// --params: every parameter with its default, current value and source.
int print_params(std::ostream& out, std::ostream& err);

// --params-markdown: docs/configuration.md (independent of the environment).
int print_params_markdown(std::ostream& out);

// --check [--json] [--plugin PATH] [--no-gpu] [--sysfs-root DIR]: the node
// check (node_check.h).
int run_node_check(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

// --topo [-o FILE] [--shape auto|sysfs|list|NAME] [--sysfs-root DIR]
// [--cpuinfo FILE] [--plugin PATH]: an NCCL topology file (docs/topology.md);
// 1 when the file follows a tree that pairs no GPU with a NIC.
int run_topology(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace weft::info
