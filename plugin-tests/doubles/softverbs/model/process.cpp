// This process's identity among the processes that share a registry
// directory, and the helpers that keep that directory tidy.

#include "process.h"

#include <dirent.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <mutex>
#include <random>
#include <vector>

#include "env.h"

namespace softverbs {

pid_t self_pid() {
  return getpid();
}

namespace {

std::mutex g_nonce_mu;
pid_t g_nonce_pid = 0;
uint64_t g_nonce = 0;

}  // namespace

uint64_t process_nonce() {
  // Recomputed after fork: a child must not reuse its parent's names.
  std::lock_guard<std::mutex> lock(g_nonce_mu);
  if (g_nonce_pid != getpid()) {
    std::random_device rd;
    g_nonce = (static_cast<uint64_t>(rd()) << 32) ^ rd() ^ static_cast<uint64_t>(getpid());
    g_nonce &= 0xffffffffffULL;
    g_nonce_pid = getpid();
  }
  return g_nonce;
}

namespace {

std::mutex g_dir_mu;
// The last directory known to exist. Never destroyed: the cleanup at exit
// (lifecycle.cpp) asks for the directory after static destructors ran.
std::string& dir_made() {
  static auto* made = new std::string;
  return *made;
}

}  // namespace

std::string registry_dir() {
  const char* set = std::getenv("SOFTVERBS_DIR");
  std::string dir = set != nullptr && *set != '\0' ? std::string(set)
                                                   : "/tmp/softverbs-" + std::to_string(getuid());
  // Asked on every queue pair's creation and lookup: no system call once
  // made (forget_registry_dir() when a file cannot be created in it).
  std::lock_guard<std::mutex> lock(g_dir_mu);
  if (dir == dir_made()) return dir;
  if (mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
    // mkdir -p: tests point SOFTVERBS_DIR at fresh nested paths.
    std::string partial;
    for (const std::string& part : split(dir, '/')) {
      partial += "/" + part;
      if (mkdir(partial.c_str(), 0700) != 0 && errno != EEXIST) return "";
    }
  }
  dir_made() = dir;
  return dir;
}

void forget_registry_dir() {
  std::lock_guard<std::mutex> lock(g_dir_mu);
  dir_made().clear();
}

bool pid_alive(pid_t pid) {
  if (pid <= 0) return false;
  return kill(pid, 0) == 0 || errno != ESRCH;
}

void remove_tree(const std::string& path) {
  struct stat st;
  if (lstat(path.c_str(), &st) != 0) return;
  if (S_ISDIR(st.st_mode)) {
    if (DIR* d = opendir(path.c_str())) {
      std::vector<std::string> names;
      while (dirent* e = readdir(d)) {
        std::string name = e->d_name;
        if (name != "." && name != "..") names.push_back(name);
      }
      closedir(d);
      for (const std::string& name : names) remove_tree(path + "/" + name);
    }
    rmdir(path.c_str());
  } else {
    unlink(path.c_str());
  }
}

}  // namespace softverbs
