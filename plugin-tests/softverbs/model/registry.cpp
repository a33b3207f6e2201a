// The QP registry: one file per QP of every process sharing the registry
// directory, so that a QP number leads to its owner's NIC and ports.

#include "registry.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
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

}  // namespace

uint32_t registry_create_qp(const std::string& nic_path, const DeviceInfo& device) {
  std::string dir = registry_dir();
  if (dir.empty()) return 0;
  std::string text = "pid " + std::to_string(getpid()) + "\nnic " + nic_path + "\nlink " +
                     (device.ib ? "ib" : "eth") + "\n";
  for (size_t p = 1; p <= device.ports.size(); ++p) {
    const PortInfo& port = device.ports[p - 1];
    text += "port " + std::to_string(p) + " " + std::to_string(port.lid);
    for (const GidSlot& slot : port.gids) {
      if (!slot.valid) continue;
      char hex[33];
      for (int i = 0; i < 16; ++i) std::snprintf(hex + 2 * i, 3, "%02x", slot.gid.raw[i]);
      text += " ";
      text += hex;
    }
    text += "\n";
  }
  // QP numbers are 24 bits (EFA's 16: libfabric's EFA address holds 16);
  // start each process somewhere else so that collisions (and their file
  // reads) stay rare.
  const uint32_t span = (device.efa ? 0x10000u : 0x1000000u) - 0x200u;
  static std::atomic<uint32_t> cursor{0};
  uint32_t expected = 0;
  cursor.compare_exchange_strong(
      expected, 0x100 + static_cast<uint32_t>((process_nonce() * 2654435761ULL) % span));
  for (int attempt = 0; attempt < (1 << 16); ++attempt) {
    uint32_t qpn = cursor.fetch_add(1);
    qpn = 0x100 + (qpn - 0x100) % span;
    std::string path = dir + "/qp-" + std::to_string(qpn);
    int fd = open(path.c_str(), O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0644);
    if (fd < 0 && errno == ENOENT && attempt == 0) {
      forget_registry_dir();  // removed since: make it again
      dir = registry_dir();
      if (dir.empty()) return 0;
      path = dir + "/qp-" + std::to_string(qpn);
      fd = open(path.c_str(), O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0644);
    }
    if (fd < 0) {
      if (errno != EEXIST) return 0;
      RemoteQp other;
      if (parse_remote(read_text(path), &other) && !pid_alive(other.pid)) {
        unlink(path.c_str());
        fd = open(path.c_str(), O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0644);
      }
      if (fd < 0) continue;
    }
    bool ok = write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
    close(fd);
    if (ok) return qpn;
    unlink(path.c_str());
    return 0;
  }
  return 0;
}

void registry_remove_qp(uint32_t qpn) {
  unlink(qp_file(qpn).c_str());
}

bool registry_read_qp(uint32_t qpn, RemoteQp* out) {
  return parse_remote(read_text(qp_file(qpn)), out);
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
      RemoteQp other;
      if (parse_remote(read_text(dir + "/" + name), &other) && !pid_alive(other.pid)) {
        unlink((dir + "/" + name).c_str());
      }
    } else if (std::sscanf(name.c_str(), "nic-%d-", &pid) == 1 ||
               std::sscanf(name.c_str(), "sys-%d-", &pid) == 1) {
      if (!pid_alive(pid)) remove_tree(dir + "/" + name);
    }
  }
}

}  // namespace softverbs
