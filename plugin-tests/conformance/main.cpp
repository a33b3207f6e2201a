// weft-conformance: checks an ncclNet plugin against the ABI rules NCCL
// relies on, through the exported function tables only, with two processes.
//   weft-conformance [--plugin PATH] [Catch2 options] [test spec]
// Exit status: 0 when every check passed, otherwise Catch2's count of failed
// assertions (at most 255). docs/conformance.md explains each check.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>
#include <cstdio>

#include "plugin_under_test.h"

int main(int argc, char** argv) {
  Catch::Session session;
  std::string plugin;
  auto cli = session.cli() |
             Catch::clara::Opt(plugin, "path")["--plugin"](
                 "ncclNet plugin .so to check (default: $WEFT_CONFORMANCE_PLUGIN, else the weft "
                 "built with this program)");
  session.cli(cli);
  if (int rc = session.applyCommandLine(argc, argv); rc != 0) return rc;
  if (session.configData().showHelp || session.configData().listTests ||
      session.configData().listTags || session.configData().listTestNamesOnly)
    return session.run();
  if (!plugin.empty()) weft::ft::set_plugin_path(plugin);

  std::string error;
  const auto& versions = weft::ft::exported_versions(&error);
  std::string found, missing;
  for (int v = 12; v >= 6; --v) {
    bool has = false;
    for (int x : versions) has = has || x == v;
    (has ? found : missing) += " v" + std::to_string(v);
  }
  std::printf("weft-conformance: plugin %s\n", weft::ft::plugin_path().c_str());
  std::printf("  exports ncclNetPlugin:%s\n", found.empty() ? " (none)" : found.c_str());
  if (!missing.empty()) std::printf("  not exported (skipped):%s\n", missing.c_str());
  if (versions.empty()) std::printf("  error: %s\n", error.c_str());
  std::fflush(stdout);
  return session.run();
}
