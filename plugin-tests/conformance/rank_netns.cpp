#include "rank_netns.h"

#include <fcntl.h>
#include <sched.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>

namespace weft::ft {

void enter_rank_netns(int rank) {
  const char* list = std::getenv("WEFT_TEST_RANK_NETNS");
  if (list == nullptr || *list == '\0') return;
  std::string names(list);
  size_t comma = names.find(',');
  if (comma == std::string::npos) {
    throw std::runtime_error("WEFT_TEST_RANK_NETNS=\"" + names +
                             "\": give two namespace names, \"A,B\"");
  }
  std::string name = rank % 2 == 0 ? names.substr(0, comma) : names.substr(comma + 1);
  std::string path = "/run/netns/" + name;
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0 || ::setns(fd, CLONE_NEWNET) != 0) {
    std::string error = std::strerror(errno);
    if (fd >= 0) ::close(fd);
    throw std::runtime_error("cannot enter network namespace " + path + ": " + error);
  }
  ::close(fd);
}

}  // namespace weft::ft
