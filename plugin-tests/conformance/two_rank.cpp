#include "two_rank.h"

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/lsan_interface.h>
#endif

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "check.h"
#include "rank_netns.h"

namespace weft::ft {
namespace {

struct Child {
  pid_t pid = -1;
  int err_fd = -1;  // read end of the child's failure-report pipe
  std::string text;
  bool exited = false;
  int status = 0;
  std::string stacks;
  bool stopped_after_peer = false;
};

// Thread stacks of a hung process via gdb (when installed; WEFT_TEST_NO_GDB
// turns it off).
std::string stacks_of(pid_t pid) {
  if (std::getenv("WEFT_TEST_NO_GDB") || ::access("/usr/bin/gdb", X_OK) != 0) return {};
  std::string cmd = "timeout 60 /usr/bin/gdb -p " + std::to_string(pid) +
                    " -batch -nx -ex 'thread apply all bt 25' 2>/dev/null | grep -E '^(Thread|#)'";
  std::string out;
  if (FILE* f = ::popen(cmd.c_str(), "r")) {
    char line[1024];
    while (std::fgets(line, sizeof line, f) && out.size() < 12000) out += line;
    ::pclose(f);
  }
  return out;
}

void drain(Child& c) {
  if (c.err_fd < 0) return;
  char buf[4096];
  for (;;) {
    ssize_t n = ::read(c.err_fd, buf, sizeof buf);
    if (n > 0) {
      c.text.append(buf, static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n == 0) {
      ::close(c.err_fd);
      c.err_fd = -1;
    }
    return;  // EAGAIN or EOF
  }
}

void write_all(int fd, const std::string& s) {
  const char* p = s.data();
  size_t n = s.size();
  while (n) {
    ssize_t w = ::write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return;
    p += w;
    n -= static_cast<size_t>(w);
  }
}

// WEFT_TEST_RANK_ENV="1:NAME=VALUE,0:NAME=VALUE": variables set in one
// rank's process only, before it opens the plugin (two processes that
// differ, such as one without liveness links).
void set_rank_env(int id) {
  const char* list = std::getenv("WEFT_TEST_RANK_ENV");
  if (list == nullptr || *list == '\0') return;
  std::string entries(list);
  size_t start = 0;
  while (start <= entries.size()) {
    size_t end = entries.find(',', start);
    if (end == std::string::npos) end = entries.size();
    std::string entry = entries.substr(start, end - start);
    start = end + 1;
    if (entry.empty()) continue;
    size_t colon = entry.find(':');
    size_t equals = entry.find('=');
    if (colon == std::string::npos || equals == std::string::npos || equals < colon ||
        (entry.substr(0, colon) != "0" && entry.substr(0, colon) != "1")) {
      throw std::runtime_error("WEFT_TEST_RANK_ENV entry \"" + entry +
                               "\": give RANK:NAME=VALUE, RANK 0 or 1");
    }
    if (std::stoi(entry.substr(0, colon)) != id) continue;
    ::setenv(entry.substr(colon + 1, equals - colon - 1).c_str(), entry.substr(equals + 1).c_str(),
             1);
  }
}

[[noreturn]] void child_main(int id, const RankBody& body, int chan_fd, int err_fd) {
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  ::alarm(static_cast<unsigned>(test_timeout_s() + 60));  // backstop if the harness dies
  set_rank_label("rank " + std::to_string(id));
  start_deadline();
  int code = 0;
  try {
    enter_rank_netns(id);
    set_rank_env(id);
    Channel chan(chan_fd);
    Rank r;
    r.id = id;
    r.peer = chan_fd >= 0 ? &chan : nullptr;
    body(r);
  } catch (const std::exception& e) {
    write_all(err_fd, e.what());
    code = 1;
  } catch (...) {
    write_all(err_fd, rank_label() + ": unknown exception");
    code = 1;
  }
#if defined(__SANITIZE_ADDRESS__)
  // _exit skips LeakSanitizer's check at exit: a rank leaking fails here.
  if (code == 0 && __lsan_do_recoverable_leak_check() != 0) {
    write_all(err_fd, rank_label() + ": LeakSanitizer found leaks (see its report above)");
    code = 1;
  }
#endif
  ::close(err_fd);
  ::_exit(code);  // no atexit handlers, no flushing of the parent's buffers
}

}  // namespace

RanksResult run_ranks(const std::vector<RankBody>& bodies) {
  RanksResult res;
  if (bodies.empty() || bodies.size() > 2) {
    res.report = "run_ranks: needs one or two bodies";
    return res;
  }
  int sp[2] = {-1, -1};
  if (bodies.size() == 2 && ::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) != 0) {
    res.report = std::string("socketpair: ") + std::strerror(errno);
    return res;
  }
  std::fflush(stdout);
  std::fflush(stderr);
  std::vector<Child> kids(bodies.size());
  for (size_t i = 0; i < bodies.size(); ++i) {
    int ep[2];
    if (::pipe2(ep, O_CLOEXEC) != 0) {
      res.report = std::string("pipe: ") + std::strerror(errno);
      for (auto& k : kids)
        if (k.pid > 0) ::kill(k.pid, SIGKILL);
      return res;
    }
    pid_t pid = ::fork();
    if (pid == 0) {
      ::close(ep[0]);
      int mine = bodies.size() == 2 ? sp[i] : -1;
      if (bodies.size() == 2) ::close(sp[1 - i]);
      for (auto& k : kids)
        if (k.err_fd >= 0) ::close(k.err_fd);
      child_main(static_cast<int>(i), bodies[i], mine, ep[1]);
    }
    ::close(ep[1]);
    if (pid < 0) {
      ::close(ep[0]);
      res.report = std::string("fork: ") + std::strerror(errno);
      for (auto& k : kids)
        if (k.pid > 0) ::kill(k.pid, SIGKILL);
      return res;
    }
    ::fcntl(ep[0], F_SETFL, O_NONBLOCK);
    kids[i].pid = pid;
    kids[i].err_fd = ep[0];
  }
  if (sp[0] >= 0) {
    ::close(sp[0]);
    ::close(sp[1]);
  }

  // Children enforce their own deadline; this one is the hard stop.
  auto hard_stop = std::chrono::steady_clock::now() + std::chrono::seconds(test_timeout_s() + 10);
  bool killed = false, peer_failed = false;
  for (;;) {
    bool all = true;
    for (auto& k : kids) {
      drain(k);
      if (!k.exited) {
        pid_t w = ::waitpid(k.pid, &k.status, WNOHANG);
        if (w == k.pid) {
          k.exited = true;
          // A failed rank leaves its peer waiting on messages that never
          // come: give the peer a few seconds to finish, then stop it.
          if (!(WIFEXITED(k.status) && WEXITSTATUS(k.status) == 0) && !peer_failed) {
            peer_failed = true;
            hard_stop =
                std::min(hard_stop, std::chrono::steady_clock::now() + std::chrono::seconds(3));
          }
        } else {
          all = false;
        }
      }
    }
    if (all) break;
    if (!killed && std::chrono::steady_clock::now() > hard_stop) {
      for (auto& k : kids) {
        if (k.exited) continue;
        if (!peer_failed) k.stacks = stacks_of(k.pid);  // where it hangs, for the report
        k.stopped_after_peer = peer_failed;
        ::kill(k.pid, SIGKILL);
      }
      killed = true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  for (auto& k : kids) {
    if (k.err_fd >= 0) {
      ::fcntl(k.err_fd, F_SETFL, 0);
      drain(k);
    }
  }

  std::ostringstream os;
  res.ok = true;
  for (size_t i = 0; i < kids.size(); ++i) {
    const auto& k = kids[i];
    os << "rank " << i << ": ";
    if (WIFEXITED(k.status) && WEXITSTATUS(k.status) == 0 && k.text.empty()) {
      os << "passed";
    } else {
      res.ok = false;
      if (WIFSIGNALED(k.status)) {
        int sig = WTERMSIG(k.status);
        os << "killed by signal " << sig << " (" << strsignal(sig) << ")";
        if (killed && sig == SIGKILL)
          os << (k.stopped_after_peer ? " by the harness after the other rank failed"
                                      : " by the harness after the hard timeout (hang)");
        if (sig == SIGALRM) os << " (alarm backstop: hang)";
      } else {
        os << "exit status " << WEXITSTATUS(k.status);
        // e.g. libpsm2, loaded by libfabric, turns SIGSEGV into exit(1)
        if (k.text.empty()) os << " without a failure report (a crash caught by a signal handler?)";
      }
      if (!k.text.empty()) os << ": " << k.text;
      if (!k.stacks.empty()) os << "\n  stacks of the hung rank " << i << ":\n" << k.stacks;
    }
    os << "\n";
  }
  res.report = os.str();
  // Unwrapped, for grep and for ctest's failure regexes (Catch2 wraps its
  // own output at 80 columns).
  if (!res.ok) std::fprintf(stderr, "rank report:\n%s", res.report.c_str());
  return res;
}

}  // namespace weft::ft
