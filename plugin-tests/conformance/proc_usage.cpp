#include "proc_usage.h"

#include <dirent.h>
#include <malloc.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>

namespace weft::ft {
namespace {

long entries(const char* dir) {
  long n = 0;
  if (DIR* d = ::opendir(dir)) {
    while (const dirent* e = ::readdir(d))
      if (e->d_name[0] != '.') ++n;
    ::closedir(d);
  }
  return n;
}

long vm_rss_kib() {
  std::ifstream in("/proc/self/status");
  std::string key;
  long v = 0;
  while (in >> key) {
    if (key == "VmRSS:") {
      in >> v;
      return v;
    }
    in.ignore(1 << 12, '\n');
  }
  return -1;
}

// Counts this process's fds, and the Unix sockets among them, in one pass.
// Each fd is asked itself (SO_DOMAIN), so a socket another thread opens or
// closes meanwhile is never counted as something else.
void count_fds(ProcUsage* u) {
  DIR* d = ::opendir("/proc/self/fd");
  if (d == nullptr) return;
  const int own = ::dirfd(d);
  while (const dirent* e = ::readdir(d)) {
    if (e->d_name[0] == '.') continue;
    int fd = std::atoi(e->d_name);
    if (fd == own) continue;
    ++u->fds;
    int domain = 0;
    socklen_t len = sizeof domain;
    if (::getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &domain, &len) == 0 && domain == AF_UNIX)
      ++u->unix_sockets;
  }
  ::closedir(d);
}

}  // namespace

ProcUsage proc_usage() {
  ProcUsage u;
  count_fds(&u);
  u.threads = entries("/proc/self/task");
  ::malloc_trim(0);  // freed memory glibc keeps is not a leak
  u.rss_kib = vm_rss_kib();
  const struct mallinfo2 heap = ::mallinfo2();
  u.heap_in_use_kib = static_cast<long>((heap.uordblks + heap.hblkhd) / 1024);
  return u;
}

std::string to_string(const ProcUsage& u) {
  return std::to_string(u.fds) + " fds (" + std::to_string(u.unix_sockets) + " Unix sockets), " +
         std::to_string(u.threads) + " threads, VmRSS " + std::to_string(u.rss_kib) +
         " KiB, heap in use " + std::to_string(u.heap_in_use_kib) + " KiB";
}

}  // namespace weft::ft
