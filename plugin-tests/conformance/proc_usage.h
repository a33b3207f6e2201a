// What a process holds, from /proc/self: open fds, threads, resident
// memory. The init/finalize-cycle check compares two snapshots.
#pragma once

#include <string>

namespace weft::ft {

struct ProcUsage {
  long fds = 0;
  long threads = 0;
  long rss_kib = 0;
};

ProcUsage proc_usage();
std::string to_string(const ProcUsage& u);

}  // namespace weft::ft
