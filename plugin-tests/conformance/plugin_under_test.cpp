#include "plugin_under_test.h"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>

#include "weft_client/net_client.h"

#ifndef WEFT_CONFORMANCE_DEFAULT_PLUGIN
#error "WEFT_CONFORMANCE_DEFAULT_PLUGIN must name the default plugin .so"
#endif

namespace weft::ft {
namespace {

std::string g_path;

struct Exported {
  std::vector<int> versions;
  std::string error;
};

// dlopen runs the plugin's constructors: keep that out of the Catch2
// process (children fork from it) by asking a throwaway child.
Exported probe(const std::string& path) {
  Exported e;
  int fds[2];
  if (::pipe(fds) != 0) {
    e.error = "pipe failed";
    return e;
  }
  pid_t pid = ::fork();
  if (pid == 0) {
    ::close(fds[0]);
    std::string err;
    std::string out;
    for (int v : exported_abi_versions(path, err)) out += static_cast<char>(v);
    out += '\0';
    out += err;
    ssize_t w = ::write(fds[1], out.data(), out.size());
    ::_exit(w == static_cast<ssize_t>(out.size()) ? 0 : 1);
  }
  ::close(fds[1]);
  std::string in;
  char buf[512];
  for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) != 0;) {
    if (n < 0) break;
    in.append(buf, static_cast<size_t>(n));
  }
  ::close(fds[0]);
  int status = 0;
  if (pid > 0) ::waitpid(pid, &status, 0);
  const size_t nul = in.find('\0');
  if (pid < 0 || nul == std::string::npos) {
    e.error = "probing " + path + " crashed or failed (status " + std::to_string(status) + ")";
    return e;
  }
  for (size_t i = 0; i < nul; ++i) e.versions.push_back(in[i]);
  e.error = in.substr(nul + 1);
  return e;
}

}  // namespace

void set_plugin_path(const std::string& path) {
  g_path = path;
}

std::string plugin_path() {
  if (!g_path.empty()) return g_path;
  const char* p = std::getenv("WEFT_CONFORMANCE_PLUGIN");
  if (p && *p) return p;
  // Installed, the build tree is gone: let dlopen search the library path.
  return ::access(WEFT_CONFORMANCE_DEFAULT_PLUGIN, F_OK) == 0 ? WEFT_CONFORMANCE_DEFAULT_PLUGIN
                                                              : "libnccl-net-weft.so";
}

const std::vector<int>& exported_versions(std::string* error) {
  static const Exported e = probe(plugin_path());
  if (error) *error = e.error;
  return e.versions;
}

namespace {

// Whether the comma-separated list in environment variable `name` allows
// version `v` (an unset or empty list allows every version).
bool listed(const char* name, int v) {
  const char* s = std::getenv(name);
  if (!s || !*s) return true;
  std::string list = std::string(",") + s + ",";
  return list.find("," + std::to_string(v) + ",") != std::string::npos;
}

}  // namespace

bool abi_version_selected(int v) {
  const auto& ex = exported_versions();
  if (std::find(ex.begin(), ex.end(), v) == ex.end()) return false;
  return listed("WEFT_TEST_VERSIONS", v) && listed("WEFT_TEST_STAGE_VERSIONS", v);
}

int newest_selected_version() {
  for (int v = 12; v >= 6; --v)
    if (abi_version_selected(v)) return v;
  return 0;
}

}  // namespace weft::ft
