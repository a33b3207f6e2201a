// The QP registry (registry.h). qp-<qpn> files of an older layout (plain
// files holding the description) are still read and reclaimed.

#include "registry.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>

#include "env.h"
#include "process.h"

namespace softverbs {

namespace {

std::string qp_file(uint32_t qpn) {
  return registry_dir() + "/qp-" + std::to_string(qpn);
}

bool parse_remote(const std::string& text, RemoteQp* out) {
  std::istringstream in(text);
  std::string line;
  bool have_pid = false;
  bool have_nic = false;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string key;
    fields >> key;
    if (key == "pid") {
      fields >> out->pid;
      have_pid = true;
    } else if (key == "nic") {
      fields >> out->nic;
      have_nic = !out->nic.empty();
    } else if (key == "link") {
      std::string link;
      fields >> link;
      out->ib = link == "ib";
    } else if (key == "port") {
      RemotePort port;
      fields >> port.port >> port.lid;
      std::string hex;
      while (fields >> hex) {
        if (hex.size() != 32) continue;
        ibv_gid gid{};
        for (int i = 0; i < 16; ++i) {
          gid.raw[i] =
              static_cast<uint8_t>(std::strtoul(hex.substr(2 * i, 2).c_str(), nullptr, 16));
        }
        port.gids.push_back(gid);
      }
      out->ports.push_back(std::move(port));
    }
  }
  return have_pid && have_nic;
}

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string describe(const std::string& nic_path, const DeviceInfo& device) {
  std::string text = "pid " + std::to_string(getpid()) + "\nnic " + nic_path + "\nlink " +
                     (device.ib ? "ib" : "eth") + "\n";
  for (size_t p = 1; p <= device.ports.size(); ++p) {
    const PortInfo& port = device.ports[p - 1];
    text += "port " + std::to_string(p) + " " + std::to_string(port.lid);
    for (const GidSlot& slot : port.gids) {
      if (!slot.valid) continue;
      static const char kHex[] = "0123456789abcdef";
      char hex[33];
      for (int i = 0; i < 16; ++i) {
        hex[2 * i] = kHex[slot.gid.raw[i] >> 4];
        hex[2 * i + 1] = kHex[slot.gid.raw[i] & 0xf];
      }
      hex[32] = '\0';
      text += " ";
      text += hex;
    }
    text += "\n";
  }
  return text;
}

// The descriptions this process wrote (text -> file name in the registry)
// and those it read (file name -> parsed). Names carry pid and nonce, so a
// name never describes two things; never destroyed (used at exit).
struct Descriptions {
  std::mutex mu;
  std::map<std::string, std::string> written;
  std::map<std::string, RemoteQp> read;
  int next = 0;
};

Descriptions& descriptions() {
  static auto* all = new Descriptions;
  return *all;
}

std::string basename_of(const std::string& path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// The file that describes this QP's NIC and device, written on first use.
std::string description_file(const std::string& dir, const std::string& nic_path,
                             const DeviceInfo& device) {
  std::string text = describe(nic_path, device);
  Descriptions& all = descriptions();
  std::lock_guard<std::mutex> lock(all.mu);
  auto found = all.written.find(text);
  if (found != all.written.end() && access((dir + "/" + found->second).c_str(), F_OK) == 0)
    return found->second;
  std::string name = basename_of(nic_path) + ".info-" + std::to_string(all.next++);
  std::string path = dir + "/" + name;
  int fd = open(path.c_str(), O_CREAT | O_TRUNC | O_WRONLY | O_CLOEXEC, 0644);
  if (fd < 0) return "";
  bool ok = write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  close(fd);
  if (!ok) {
    unlink(path.c_str());
    return "";
  }
  all.written[text] = name;
  return name;
}

// The description qp-<qpn> (at `path`) leads to; false when none.
bool read_entry(const std::string& dir, const std::string& path, RemoteQp* out) {
  char target[PATH_MAX];
  ssize_t length = readlink(path.c_str(), target, sizeof(target) - 1);
  if (length < 0) {
    // A plain file of the older layout holds the description itself.
    return errno == EINVAL && parse_remote(read_text(path), out);
  }
  target[length] = '\0';
  const std::string name(target);
  Descriptions& all = descriptions();
  {
    std::lock_guard<std::mutex> lock(all.mu);
    auto found = all.read.find(name);
    if (found != all.read.end()) {
      *out = found->second;
      return true;
    }
  }
  RemoteQp parsed;
  if (!parse_remote(read_text(dir + "/" + name), &parsed)) return false;
  std::lock_guard<std::mutex> lock(all.mu);
  all.read[name] = parsed;
  *out = std::move(parsed);
  return true;
}

// The owner of an existing entry, without reading a description it has
// not read yet where the link's name says it (nic-<pid>-...).
pid_t entry_owner(const std::string& dir, const std::string& path) {
  char target[PATH_MAX];
  ssize_t length = readlink(path.c_str(), target, sizeof(target) - 1);
  if (length >= 0) {
    target[length] = '\0';
    int pid = 0;
    if (std::sscanf(target, "nic-%d-", &pid) == 1) return pid;
  }
  RemoteQp other;
  return read_entry(dir, path, &other) ? other.pid : 0;
}

}  // namespace

uint32_t registry_create_qp(const std::string& nic_path, const DeviceInfo& device) {
  std::string dir = registry_dir();
  if (dir.empty()) return 0;
  std::string info = description_file(dir, nic_path, device);
  if (info.empty()) {
    forget_registry_dir();  // removed since: make it again
    dir = registry_dir();
    if (dir.empty()) return 0;
    info = description_file(dir, nic_path, device);
    if (info.empty()) return 0;
  }
  // QP numbers are 24 bits (EFA's 16: libfabric's EFA address holds 16);
  // start each process somewhere else so that collisions (and their
  // lookups) stay rare.
  const uint32_t span = (device.efa ? 0x10000u : 0x1000000u) - 0x200u;
  static std::atomic<uint32_t> cursor{0};
  uint32_t expected = 0;
  cursor.compare_exchange_strong(
      expected, 0x100 + static_cast<uint32_t>((process_nonce() * 2654435761ULL) % span));
  for (int attempt = 0; attempt < (1 << 16); ++attempt) {
    uint32_t qpn = cursor.fetch_add(1);
    qpn = 0x100 + (qpn - 0x100) % span;
    const std::string path = dir + "/qp-" + std::to_string(qpn);
    if (symlink(info.c_str(), path.c_str()) == 0) return qpn;
    if (errno != EEXIST) return 0;
    // Taken: by a live process, or left by a dead one.
    if (pid_alive(entry_owner(dir, path))) continue;
    unlink(path.c_str());
    if (symlink(info.c_str(), path.c_str()) == 0) return qpn;
  }
  return 0;
}

void registry_remove_qp(uint32_t qpn) {
  unlink(qp_file(qpn).c_str());
}

bool registry_read_qp(uint32_t qpn, RemoteQp* out) {
  const std::string dir = registry_dir();
  return !dir.empty() && read_entry(dir, qp_file(qpn), out);
}

void registry_forget_nic(const std::string& nic_path) {
  const std::string dir = registry_dir();
  Descriptions& all = descriptions();
  std::lock_guard<std::mutex> lock(all.mu);
  const std::string prefix = basename_of(nic_path) + ".info-";
  for (auto it = all.written.begin(); it != all.written.end();) {
    if (it->second.rfind(prefix, 0) == 0) {
      if (!dir.empty()) unlink((dir + "/" + it->second).c_str());
      it = all.written.erase(it);
    } else {
      ++it;
    }
  }
}

void registry_reclaim() {
  std::string dir = registry_dir();
  if (dir.empty()) return;
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return;
  std::vector<std::string> names;
  while (dirent* e = readdir(d)) names.push_back(e->d_name);
  closedir(d);
  for (const std::string& name : names) {
    int pid = 0;
    if (name.rfind("qp-", 0) == 0) {
      // A link whose description is gone, or whose owner is: reclaimed.
      if (!pid_alive(entry_owner(dir, dir + "/" + name))) unlink((dir + "/" + name).c_str());
    } else if (std::sscanf(name.c_str(), "nic-%d-", &pid) == 1 ||
               std::sscanf(name.c_str(), "sys-%d-", &pid) == 1) {
      if (!pid_alive(pid)) remove_tree(dir + "/" + name);
    }
  }
}

}  // namespace softverbs
