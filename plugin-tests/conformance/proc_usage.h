// What a process holds, from /proc/self: open fds, threads, resident
// memory. The init/finalize-cycle check compares two snapshots.
#pragma once

#include <string>

namespace weft::ft {

struct ProcUsage {
  long fds = 0;
  long unix_sockets = 0;  // of fds: software devices' NICs talk over them
  long threads = 0;
  long rss_kib = 0;
  long heap_in_use_kib = 0;  // malloc's, glibc's count (reported, not bounded)
};

ProcUsage proc_usage();
// fds other than Unix sockets.
inline long fds_besides_unix_sockets(const ProcUsage& u) {
  return u.fds - u.unix_sockets;
}
std::string to_string(const ProcUsage& u);

}  // namespace weft::ft
