// weft-perf: sets up the two ranks (forked locally, or server/client on two
// hosts) and hands each its bootstrap connection.
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <string>

#include "bootstrap.h"
#include "errors.h"
#include "job_run.h"
#include "options.h"
#include "runner.h"
#include "weft_client/net_client.h"

#ifndef WEFT_DEFAULT_PLUGIN_PATH
#define WEFT_DEFAULT_PLUGIN_PATH ""
#endif
#ifndef WEFT_INSTALLED_PLUGIN_PATH
#define WEFT_INSTALLED_PLUGIN_PATH "../lib/libnccl-net-weft.so"
#endif

namespace weft::perf {
namespace {

// weft next to this program once installed (bin/../lib), else the one in
// the build tree it came from, else whatever the loader finds by name.
std::string default_plugin_path() {
  if (std::string installed = file_beside_program(WEFT_INSTALLED_PLUGIN_PATH); !installed.empty())
    return installed;
  const char* built = WEFT_DEFAULT_PLUGIN_PATH;
  if (built[0] != '\0' && access(built, R_OK) == 0) return built;
  return "libnccl-net-weft.so";
}

int exit_status(int wait_status) {
  if (WIFEXITED(wait_status)) return WEXITSTATUS(wait_status);
  return 128 + (WIFSIGNALED(wait_status) ? WTERMSIG(wait_status) : 0);
}

int run_local(const Options& opts) {
  // Bound before fork: the child connects at once, no port race.
  Listener listener(0, /*loopback_only=*/true);
  fflush(stdout);
  fflush(stderr);
  pid_t parent = getpid();
  pid_t child = fork();
  if (child < 0) throw PerfError("fork failed");
  if (child == 0) {
    listener.close();
    prctl(PR_SET_PDEATHSIG, SIGTERM);  // do not outlive rank 0
    if (getppid() != parent) _exit(1);
    int rc = 1;
    try {
      Bootstrap boot = Bootstrap::connect("127.0.0.1", listener.port(), opts.timeout_s);
      boot.set_timeout(opts.timeout_s);
      rc = run_rank(1, boot, opts, /*print_errors=*/false);
    } catch (const std::exception& e) {
      fprintf(stderr, "weft-perf (rank 1): error: %s\n", e.what());
    }
    fflush(stdout);
    fflush(stderr);
    _exit(rc);  // the parent owns stdio buffers and atexit work
  }
  int rc = 1;
  try {
    Bootstrap boot = listener.accept(opts.timeout_s);
    listener.close();
    boot.set_timeout(opts.timeout_s);
    rc = run_rank(0, boot, opts);
  } catch (const std::exception& e) {
    fprintf(stderr, "weft-perf (rank 0): error: %s\n", e.what());
    kill(child, SIGTERM);
  }
  int status = 0;
  while (waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
  int child_rc = exit_status(status);
  if (child_rc != 0 && rc == 0) {
    fprintf(stderr, "weft-perf: rank 1 exited with status %d\n", child_rc);
    rc = 1;
  }
  return rc;
}

int run_server(const Options& opts) {
  Listener listener(opts.port, /*loopback_only=*/false);
  if (!opts.launcher.empty())
    fprintf(stderr, "# weft-perf: rank 0 of 2 under %s\n", opts.launcher.c_str());
  fprintf(stderr, "# weft-perf server: waiting for a client on %s\n", listener.address().c_str());
  Bootstrap boot = listener.accept(opts.timeout_s);
  listener.close();
  fprintf(stderr, "# weft-perf server: client %s connected\n", boot.peer().c_str());
  boot.set_timeout(opts.timeout_s);
  return run_rank(0, boot, opts);
}

int run_client(const Options& opts) {
  if (!opts.launcher.empty()) {
    fprintf(stderr, "# weft-perf: rank 1 of 2 under %s, server %s\n", opts.launcher.c_str(),
            opts.host.c_str());
  }
  Bootstrap boot = Bootstrap::connect(opts.host, opts.port, opts.timeout_s);
  fprintf(stderr, "# weft-perf client: connected to %s\n", boot.peer().c_str());
  boot.set_timeout(opts.timeout_s);
  int rc = run_rank(1, boot, opts);
  if (rc == 0) fprintf(stderr, "# weft-perf client: done\n");
  return rc;
}

}  // namespace
}  // namespace weft::perf

int main(int argc, char** argv) {
  using namespace weft::perf;
  signal(SIGPIPE, SIG_IGN);  // a dead peer shows up as EPIPE, not a silent exit
  std::optional<Options> opts;
  try {
    opts = parse_options(argc, argv, default_plugin_path());
  } catch (const UsageError& e) {
    fprintf(stderr, "weft-perf: %s\n", e.what());
    return 2;
  }
  if (!opts) return 0;  // --help
  try {
    if (opts->job()) return run_job(*opts);
    switch (opts->role) {
      case Role::local:
        return run_local(*opts);
      case Role::server:
        return run_server(*opts);
      case Role::client:
        return run_client(*opts);
    }
  } catch (const std::exception& e) {
    fprintf(stderr, "weft-perf: error: %s\n", e.what());
  }
  return 1;
}
