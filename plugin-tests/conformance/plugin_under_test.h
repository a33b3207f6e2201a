// Which plugin the suite drives and which ABI versions it exports. The path
// comes from --plugin, else WEFT_CONFORMANCE_PLUGIN, else the weft built
// alongside (installed: libnccl-net-weft.so from the library path). Set it
// before any rank is forked: children inherit it.
#pragma once

#include <string>
#include <vector>

namespace weft::ft {

void set_plugin_path(const std::string& path);
std::string plugin_path();

// ncclNetPlugin_vN versions (6..12) the plugin exports, newest first. Found
// once, in a forked child, so the Catch2 process itself never loads the
// plugin. `error` says why the list is empty.
const std::vector<int>& exported_versions(std::string* error = nullptr);

// ABI versions to run: exported by the plugin and, where these are set
// (comma-separated), listed in WEFT_TEST_VERSIONS (a test's own choice,
// conformance/CMakeLists.txt) and in WEFT_TEST_STAGE_VERSIONS (a whole
// run's limit, e.g. scripts/test.sh's sanitizer stages). Every list a test
// and a stage use holds 12, so the two always share a version.
bool abi_version_selected(int v);
// The newest version abi_version_selected admits, 0 when none: for a check
// of the transport rather than of the ABI, which runs once per stage.
int newest_selected_version();

}  // namespace weft::ft
