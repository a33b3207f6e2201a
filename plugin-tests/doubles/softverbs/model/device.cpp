// softverbs devices: configuration from the environment, GID tables and the
// fake sysfs tree.

#include "device.h"

#include <arpa/inet.h>
#include <endian.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <mutex>

#include "env.h"
#include "process.h"

namespace softverbs {

namespace {

constexpr int kMaxDevices = 16;
constexpr int kMaxPorts = 4;
constexpr int kGidTableLength = 16;

std::mutex g_devices_mu;
std::atomic<Flavour> g_flavour{Flavour::kRc};
std::vector<std::unique_ptr<Device>>* g_devices = new std::vector<std::unique_ptr<Device>>();
std::string* g_sysfs_root = new std::string();
pid_t g_sysfs_pid = 0;

uint64_t fnv1a(const std::string& text, uint64_t seed = 0xcbf29ce484222325ULL) {
  uint64_t h = seed;
  for (unsigned char c : text) {
    h ^= c;
    h *= 0x100000001b3ULL;
  }
  return h;
}

struct Interface {
  std::string name;
  std::vector<in_addr> ipv4;
  std::vector<in6_addr> ipv6;
  bool up = false;
  bool loopback = false;
};

std::vector<Interface> interfaces() {
  std::vector<Interface> out;
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return out;
  for (ifaddrs* a = list; a != nullptr; a = a->ifa_next) {
    auto it = std::find_if(out.begin(), out.end(),
                           [&](const Interface& i) { return i.name == a->ifa_name; });
    if (it == out.end()) {
      out.push_back(Interface{a->ifa_name, {}, {}, false, false});
      it = out.end() - 1;
    }
    it->up = it->up || (a->ifa_flags & IFF_UP) != 0;
    it->loopback = it->loopback || (a->ifa_flags & IFF_LOOPBACK) != 0;
    if (a->ifa_addr == nullptr) continue;
    if (a->ifa_addr->sa_family == AF_INET) {
      it->ipv4.push_back(reinterpret_cast<sockaddr_in*>(a->ifa_addr)->sin_addr);
    } else if (a->ifa_addr->sa_family == AF_INET6) {
      in6_addr addr = reinterpret_cast<sockaddr_in6*>(a->ifa_addr)->sin6_addr;
      bool link_local = addr.s6_addr[0] == 0xfe && (addr.s6_addr[1] & 0xc0) == 0x80;
      if (!link_local && !IN6_IS_ADDR_LOOPBACK(&addr)) it->ipv6.push_back(addr);
    }
  }
  freeifaddrs(list);
  return out;
}

std::string default_netdev(const std::vector<Interface>& all) {
  for (const Interface& i : all) {
    if (i.up && !i.loopback && !i.ipv4.empty()) return i.name;
  }
  return "lo";
}

ibv_gid link_local_gid(uint64_t guid) {
  ibv_gid gid{};
  gid.raw[0] = 0xfe;
  gid.raw[1] = 0x80;
  uint64_t be = htobe64(guid);
  std::memcpy(gid.raw + 8, &be, 8);
  return gid;
}

ibv_mtu mtu_from_env(bool ib) {
  long v = env_long("SOFTVERBS_MTU", ib ? 4096 : 1024);
  switch (v) {
    case 1:
    case 256:
      return IBV_MTU_256;
    case 2:
    case 512:
      return IBV_MTU_512;
    case 3:
    case 1024:
      return IBV_MTU_1024;
    case 4:
    case 2048:
      return IBV_MTU_2048;
    default:
      return IBV_MTU_4096;
  }
}

std::string gid_text(const ibv_gid& gid) {
  char out[40];
  std::snprintf(out, sizeof(out),
                "%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x",
                gid.raw[0], gid.raw[1], gid.raw[2], gid.raw[3], gid.raw[4], gid.raw[5], gid.raw[6],
                gid.raw[7], gid.raw[8], gid.raw[9], gid.raw[10], gid.raw[11], gid.raw[12],
                gid.raw[13], gid.raw[14], gid.raw[15]);
  return out;
}

// "100 Gb/sec (4X EDR)"
std::string rate_text(uint8_t speed, uint8_t width) {
  int lanes = 1;
  const char* wname = "1X";
  switch (width) {
    case 2:
      lanes = 4;
      wname = "4X";
      break;
    case 4:
      lanes = 8;
      wname = "8X";
      break;
    case 8:
      lanes = 12;
      wname = "12X";
      break;
    case 16:
      lanes = 2;
      wname = "2X";
      break;
    default:
      break;
  }
  double lane = 2.5;
  const char* sname = "SDR";
  switch (speed) {
    case 2:
      lane = 5;
      sname = "DDR";
      break;
    case 4:
      lane = 10;
      sname = "QDR";
      break;
    case 8:
      lane = 10;
      sname = "FDR10";
      break;
    case 16:
      lane = 14;
      sname = "FDR";
      break;
    case 32:
      lane = 25;
      sname = "EDR";
      break;
    case 64:
      lane = 50;
      sname = "HDR";
      break;
    case 128:
      lane = 100;
      sname = "NDR";
      break;
    default:
      break;
  }
  char out[64];
  double rate = lane * lanes;
  if (rate == static_cast<int>(rate)) {
    std::snprintf(out, sizeof(out), "%d Gb/sec (%s %s)", static_cast<int>(rate), wname, sname);
  } else {
    std::snprintf(out, sizeof(out), "%.1f Gb/sec (%s %s)", rate, wname, sname);
  }
  return out;
}

void write_file(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::trunc);
  out << text;
}

void make_dirs(const std::string& path) {
  std::string partial;
  for (const std::string& part : split(path, '/')) {
    partial += "/" + part;
    mkdir(partial.c_str(), 0755);
  }
}

std::string sysfs_root() {
  if (g_sysfs_pid != getpid()) {
    forget_registry_dir();  // made again: a test may have removed it since
    std::string dir = registry_dir();
    if (dir.empty()) return "";
    char name[64];
    std::snprintf(name, sizeof(name), "/sys-%d-%" PRIx64, static_cast<int>(getpid()),
                  process_nonce());
    *g_sysfs_root = dir + name;
    g_sysfs_pid = getpid();
  }
  return *g_sysfs_root;
}

// EFA: the PCI function behind the device, with its driver.
void write_efa_sysfs(const DeviceInfo& info, const std::string& root, const std::string& dir) {
  std::string pci = root + "/devices/pci0000:00/" + info.pci_path;
  std::string driver = root + "/bus/pci/drivers/efa";
  make_dirs(pci);
  make_dirs(driver);
  symlink(driver.c_str(), (pci + "/driver").c_str());
  symlink(pci.c_str(), (dir + "/device").c_str());
}

// The uverbs ABI version file libfabric reads under $SYSFS_PATH, in a tree
// shared by the processes of the registry and never removed, so that
// SYSFS_PATH stays valid when the library is unloaded and loaded again.
std::string shared_sysfs_root() {
  forget_registry_dir();  // made again: a test may have removed it since
  std::string dir = registry_dir();
  if (dir.empty()) return "";
  std::string root = dir + "/sysfs";
  std::string file = root + "/class/infiniband_verbs/abi_version";
  if (access(file.c_str(), R_OK) != 0) {
    make_dirs(root + "/class/infiniband_verbs");
    std::string tmp = file + "." + std::to_string(getpid());
    write_file(tmp, "6\n");
    rename(tmp.c_str(), file.c_str());
  }
  return root;
}

void write_sysfs(const DeviceInfo& info, const std::string& dir) {
  remove_tree(dir);
  make_dirs(dir);
  uint64_t g = info.node_guid;
  char guid[32];
  std::snprintf(guid, sizeof(guid), "%04x:%04x:%04x:%04x\n", static_cast<unsigned>(g >> 48),
                static_cast<unsigned>((g >> 32) & 0xffff),
                static_cast<unsigned>((g >> 16) & 0xffff), static_cast<unsigned>(g & 0xffff));
  write_file(dir + "/node_guid", guid);
  write_file(dir + "/sys_image_guid", guid);
  write_file(dir + "/node_type", "1: CA\n");
  write_file(dir + "/fw_ver", "softverbs 1.0\n");
  if (!info.pci_path.empty() && !info.efa) {
    symlink(info.pci_path.c_str(), (dir + "/device").c_str());
  }
  for (size_t p = 1; p <= info.ports.size(); ++p) {
    const PortInfo& port = info.ports[p - 1];
    std::string pdir = dir + "/ports/" + std::to_string(p);
    make_dirs(pdir + "/gids");
    make_dirs(pdir + "/gid_attrs/types");
    make_dirs(pdir + "/gid_attrs/ndevs");
    write_file(pdir + "/rate", rate_text(info.speed, info.width) + "\n");
    write_file(pdir + "/link_layer", info.ib ? "InfiniBand\n" : "Ethernet\n");
    char lid[16];
    std::snprintf(lid, sizeof(lid), "0x%x\n", port.lid);
    write_file(pdir + "/lid", lid);
    write_file(pdir + "/state", "4: ACTIVE\n");
    write_file(pdir + "/phys_state", "5: LinkUp\n");
    for (size_t i = 0; i < port.gids.size(); ++i) {
      const GidSlot& slot = port.gids[i];
      std::string index = std::to_string(i);
      write_file(pdir + "/gids/" + index, gid_text(slot.gid) + "\n");
      if (!slot.valid) continue;
      write_file(pdir + "/gid_attrs/types/" + index,
                 slot.type == IBV_GID_TYPE_ROCE_V2 ? "RoCE v2\n" : "IB/RoCE v1\n");
      if (!info.ib) write_file(pdir + "/gid_attrs/ndevs/" + index, info.netdev + "\n");
    }
  }
}

}  // namespace

void set_device_flavour(Flavour flavour) {
  g_flavour = flavour;
}

Flavour device_flavour() {
  return g_flavour;
}

namespace {

bool env_flag(const char* name, bool fallback) {
  return env_long(name, fallback ? 1 : 0) != 0;
}

EfaCaps efa_caps_from_env() {
  EfaCaps c;
  c.rdma_read = env_flag("SOFTEFA_RDMA_READ", c.rdma_read);
  c.rdma_write = env_flag("SOFTEFA_RDMA_WRITE", c.rdma_write);
  c.unsolicited_write_recv = env_flag("SOFTEFA_UNSOLICITED_WRITE_RECV", c.unsolicited_write_recv);
  c.rnr_retry = env_flag("SOFTEFA_RNR_RETRY", c.rnr_retry);
  c.cq_with_sgid = env_flag("SOFTEFA_CQ_WITH_SGID", c.cq_with_sgid);
  c.in_order_128 = env_flag("SOFTEFA_IN_ORDER_128", c.in_order_128);
  c.max_rdma_size = static_cast<uint32_t>(
      std::clamp(env_long("SOFTEFA_MAX_RDMA_SIZE", c.max_rdma_size), 1L, long{1u << 30}));
  c.inline_buf_size = static_cast<uint16_t>(
      std::clamp(env_long("SOFTEFA_INLINE_SIZE", c.inline_buf_size), 0L, long{kMaxInline}));
  c.rnr_backoff_us =
      static_cast<uint32_t>(std::clamp(env_long("SOFTEFA_RNR_BACKOFF_US", 100), 1L, 1000000L));
  return c;
}

}  // namespace

std::vector<Device*> scan_devices() {
  std::lock_guard<std::mutex> lock(g_devices_mu);
  const bool efa = g_flavour == Flavour::kEfa;
  int count = static_cast<int>(std::clamp(env_long("SOFTVERBS_DEVICES", 1), 0L, long{kMaxDevices}));
  int ports = static_cast<int>(std::clamp(env_long("SOFTVERBS_PORTS", 1), 1L, long{kMaxPorts}));
  bool ib = env_string("SOFTVERBS_LINK", "eth") == "ib";
  std::vector<Interface> all = interfaces();
  std::vector<std::string> netdevs = split(env_string("SOFTVERBS_NETDEV", ""), ',');
  std::vector<std::string> pci_paths = split(env_string("SOFTVERBS_PCI_PATHS", ""), ',');
  std::string node_id = env_string("SOFTVERBS_NODE_ID", "");
  if (node_id.empty()) {
    char host[256] = {};
    gethostname(host, sizeof(host) - 1);
    node_id = host;
  }
  std::string root = sysfs_root();
  std::vector<Device*> out;
  for (int i = 0; i < count; ++i) {
    auto device = std::make_unique<Device>();
    DeviceInfo& info = device->info;
    info.index = i;
    info.name = (efa ? "softefa" : "softverbs") + std::to_string(i);
    info.ib = ib && !efa;
    info.efa = efa;
    // Stable per host and index; locally administered, never zero.
    uint64_t h = fnv1a(node_id + "#" + std::to_string(i));
    info.node_guid = (h & 0x0000ffffffffff00ULL) | 0x0200000000000000ULL | 0x10;
    if (netdevs.empty()) {
      info.netdev = default_netdev(all);
    } else {
      info.netdev = netdevs[std::min<size_t>(i, netdevs.size() - 1)];
    }
    info.ifindex = if_nametoindex(info.netdev.c_str());
    info.speed = static_cast<uint8_t>(env_long("SOFTVERBS_SPEED", 32));
    info.width = static_cast<uint8_t>(env_long("SOFTVERBS_WIDTH", 2));
    info.mtu = mtu_from_env(ib);
    if (static_cast<size_t>(i) < pci_paths.size()) info.pci_path = pci_paths[i];
    info.pci_path = env_string(("SOFTVERBS_PCI_PATH_" + std::to_string(i)).c_str(), info.pci_path);
    if (efa) {
      // A PCI address for the fake function: the configured path's last
      // component, else 0000:00:<0x1d + i>.0 as on EC2.
      std::string bdf = info.pci_path.substr(info.pci_path.find_last_of('/') + 1);
      if (bdf.empty()) {
        char text[32];  // room for any int: GCC checks the bound without knowing i's range
        std::snprintf(text, sizeof(text), "0000:00:%02x.0", 0x1d + i);
        bdf = text;
      }
      info.pci_path = bdf;
      info.vendor_id = 0x1d0f;  // Amazon
      info.vendor_part_id = static_cast<uint32_t>(env_long("SOFTEFA_PART_ID", 0xefa1));
      info.mtu = IBV_MTU_4096;
      info.max_msg = static_cast<uint32_t>(std::clamp(env_long("SOFTEFA_MTU", 8928), 256L, 65536L));
      info.efa_caps = efa_caps_from_env();
    }
    const Interface* netdev = nullptr;
    for (const Interface& x : all) {
      if (x.name == info.netdev) netdev = &x;
    }
    for (int p = 1; p <= ports; ++p) {
      PortInfo port;
      uint64_t port_guid = info.node_guid + static_cast<uint64_t>(p - 1);
      std::vector<GidSlot> gids;
      if (efa) {
        // One GID per port, no LID: EFA's address is its GID.
        gids.push_back(GidSlot{link_local_gid(port_guid), IBV_GID_TYPE_IB, true});
      } else if (ib) {
        // Distinct per device and port of this host.
        port.lid = static_cast<uint16_t>(1 + fnv1a(node_id) % 0x8000 + i * kMaxPorts + (p - 1));
        gids.push_back(GidSlot{link_local_gid(port_guid), IBV_GID_TYPE_IB, true});
      } else {
        auto add = [&](const ibv_gid& gid) {
          gids.push_back(GidSlot{gid, IBV_GID_TYPE_ROCE_V1, true});
          gids.push_back(GidSlot{gid, IBV_GID_TYPE_ROCE_V2, true});
        };
        add(link_local_gid(port_guid));
        if (netdev != nullptr) {
          for (const in_addr& a : netdev->ipv4) {
            ibv_gid gid{};
            gid.raw[10] = 0xff;
            gid.raw[11] = 0xff;
            std::memcpy(gid.raw + 12, &a, 4);
            add(gid);
          }
          for (const in6_addr& a : netdev->ipv6) {
            ibv_gid gid{};
            std::memcpy(gid.raw, &a, 16);
            add(gid);
          }
        }
      }
      if (!efa) gids.resize(std::max<size_t>(gids.size(), kGidTableLength));
      port.gids = std::move(gids);
      info.ports.push_back(std::move(port));
    }
    ibv_device& dev = device->handle.verbs;
    device->handle.owner = device.get();
    dev.node_type = IBV_NODE_CA;
    dev.transport_type = IBV_TRANSPORT_IB;
    std::snprintf(dev.name, sizeof(dev.name), "%s", info.name.c_str());
    std::snprintf(dev.dev_name, sizeof(dev.dev_name), "uverbs%d", i);
    if (!root.empty()) {
      std::string dir = root + "/" + info.name;
      write_sysfs(info, dir);
      if (efa) write_efa_sysfs(info, root, dir);
      std::snprintf(dev.ibdev_path, sizeof(dev.ibdev_path), "%s", dir.c_str());
      std::snprintf(dev.dev_path, sizeof(dev.dev_path), "%s/uverbs%d", root.c_str(), i);
    }
    out.push_back(device.get());
    g_devices->push_back(std::move(device));
  }
  // libfabric's efa provider reads $SYSFS_PATH/class/infiniband_verbs/
  // abi_version (default /sys): point it at <registry>/sysfs when the real
  // one has none and the caller did not choose.
  if (efa && count > 0 && std::getenv("SYSFS_PATH") == nullptr &&
      access("/sys/class/infiniband_verbs/abi_version", R_OK) != 0 &&
      env_long("SOFTEFA_SET_SYSFS_PATH", 1) != 0) {
    std::string shared = shared_sysfs_root();
    if (!shared.empty()) setenv("SYSFS_PATH", shared.c_str(), 0);
  }
  return out;
}

void write_port_state(const DeviceInfo& info, int port, bool up) {
  std::lock_guard<std::mutex> lock(g_devices_mu);
  std::string root = sysfs_root();
  if (root.empty()) return;
  std::string pdir = root + "/" + info.name + "/ports/" + std::to_string(port);
  write_file(pdir + "/state", up ? "4: ACTIVE\n" : "1: DOWN\n");
  write_file(pdir + "/phys_state", up ? "5: LinkUp\n" : "3: Disabled\n");
}

void remove_sysfs() {
  std::lock_guard<std::mutex> lock(g_devices_mu);
  if (g_sysfs_pid == getpid() && !g_sysfs_root->empty()) remove_tree(*g_sysfs_root);
  g_sysfs_pid = 0;
}

}  // namespace softverbs
