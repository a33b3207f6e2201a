#include "two_rank.h"

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <fcntl.h>
#include <poll.h>
#include <sstream>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

#include "check.h"

namespace weft::ft {
namespace {

struct Child {
  pid_t pid = -1;
  int err_fd = -1;  // read end of the child's failure-report pipe
  std::string text;
  bool exited = false;
  int status = 0;
  std::string stacks;
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

[[noreturn]] void child_main(int id, const RankBody& body, int chan_fd, int err_fd) {
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  ::alarm(static_cast<unsigned>(test_timeout_s() + 60));  // backstop if the harness dies
  set_rank_label("rank " + std::to_string(id));
  start_deadline();
  int code = 0;
  try {
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
  ::close(err_fd);
  ::_exit(code);  // no atexit handlers, no flushing of the parent's buffers
}

}  // namespace

bool abi_version_selected(int v) {
  const char* s = std::getenv("WEFT_TEST_VERSIONS");
  if (!s || !*s) return true;
  std::string list = std::string(",") + s + ",";
  return list.find("," + std::to_string(v) + ",") != std::string::npos;
}

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
  bool killed = false;
  for (;;) {
    bool all = true;
    for (auto& k : kids) {
      drain(k);
      if (!k.exited) {
        pid_t w = ::waitpid(k.pid, &k.status, WNOHANG);
        if (w == k.pid) k.exited = true;
        else all = false;
      }
    }
    if (all) break;
    if (!killed && std::chrono::steady_clock::now() > hard_stop) {
      for (auto& k : kids) {
        if (k.exited) continue;
        k.stacks = stacks_of(k.pid);  // where it hangs, for the report
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
        if (killed && sig == SIGKILL) os << " by the harness after the hard timeout (hang)";
        if (sig == SIGALRM) os << " (alarm backstop: hang)";
      } else {
        os << "exit status " << WEXITSTATUS(k.status);
      }
      if (!k.text.empty()) os << ": " << k.text;
      if (!k.stacks.empty()) os << "\n  stacks of the hung rank " << i << ":\n" << k.stacks;
    }
    os << "\n";
  }
  res.report = os.str();
  return res;
}

}  // namespace weft::ft
