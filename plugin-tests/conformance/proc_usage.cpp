#include "proc_usage.h"

#include <dirent.h>
#include <malloc.h>

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

}  // namespace

ProcUsage proc_usage() {
  ProcUsage u;
  u.fds = entries("/proc/self/fd") - 1;  // minus the one opendir holds
  u.threads = entries("/proc/self/task");
  ::malloc_trim(0);  // freed memory glibc keeps is not a leak
  u.rss_kib = vm_rss_kib();
  return u;
}

std::string to_string(const ProcUsage& u) {
  return std::to_string(u.fds) + " fds, " + std::to_string(u.threads) + " threads, VmRSS " +
         std::to_string(u.rss_kib) + " KiB";
}

}  // namespace weft::ft
