#include "node_check.h"

#include <dlfcn.h>
#include <link.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <mutex>
#include <regex>
#include <sstream>

#include "core/cuda/cuda_driver.h"
#include "core/provider_names.h"
#include "core/string_split.h"
#include "core/sysfs.h"
#include "param_text.h"
#include "topology/pci_relation.h"
#include "weft/log.h"
#include "weft/params.h"

extern char** environ;

namespace weft::info {
namespace {

// --- What the plugin logs while the check drives it -----------------------

std::mutex log_mutex;
std::vector<LogLine>* log_sink = nullptr;

void capture_log(ncclDebugLogLevel level, unsigned long, const char*, int, const char* fmt, ...) {
  if (level != NCCL_LOG_WARN && level != NCCL_LOG_INFO) return;
  char text[1024];
  va_list args;
  va_start(args, fmt);
  std::vsnprintf(text, sizeof(text), fmt, args);
  va_end(args);
  std::string line = text;
  if (line.rfind("NET/weft ", 0) == 0) line.erase(0, 9);
  std::lock_guard<std::mutex> lock(log_mutex);
  if (log_sink != nullptr) log_sink->push_back({log_level_name(level), line});
}

// The transports and providers weft reported considering, from its
// "candidate KIND NAME [WHERE]: used|not used: REASON" lines.
void read_candidates(NodeReport& report) {
  static const std::regex line(
      R"(^candidate (transport|provider) (\S+) \[([^\]]*)\]: (used|not used): (.*)$)");
  for (const LogLine& entry : report.log) {
    std::smatch m;
    if (entry.level != "INFO" || !std::regex_match(entry.text, m, line)) continue;
    report.candidates.push_back({m[1], m[2], m[3], m[4] == "used", m[5]});
  }
}

// Memory regions each device allows, from weft's "device limit NAME: memory
// regions N (SOURCE)" lines.
void read_region_limits(NodeReport& report) {
  static const std::regex line(R"(^device limit (\S+): memory regions (\d+|not stated) \((.*)\)$)");
  for (const LogLine& entry : report.log) {
    std::smatch m;
    if (entry.level != "INFO" || !std::regex_match(entry.text, m, line)) continue;
    report.region_limits.push_back(
        {m[1], m[2] == "not stated" ? -1 : std::stoll(m[2].str()), m[3]});
  }
}

// Warnings logged since `from`, one per line, for a finding's text.
std::string warnings_since(const std::vector<LogLine>& log, size_t from) {
  std::lock_guard<std::mutex> lock(log_mutex);
  std::string out;
  for (size_t i = from; i < log.size(); ++i) {
    if (log[i].level != "WARN") continue;
    if (!out.empty()) out += "; ";
    out += log[i].text;
  }
  return out;
}

size_t log_size(const std::vector<LogLine>& log) {
  std::lock_guard<std::mutex> lock(log_mutex);
  return log.size();
}

void add(NodeReport& report, Severity severity, const char* topic, std::string text,
         std::string fix = {}) {
  report.findings.push_back({severity, topic, std::move(text), std::move(fix)});
}

// --- NCCL and the ncclNet version it loads --------------------------------

// The ncclNet version an NCCL release looks for first (docs/ncclnet-abi.md);
// 0 when it looks for none that weft exports (before 2.13).
int abi_for_nccl(int code) {
  if (code >= 23000) return 12;
  if (code >= 22800) return 11;
  if (code >= 22600) return 10;
  if (code >= 22400) return 9;
  if (code >= 22000) return 8;
  if (code >= 21900) return 7;
  if (code >= 21300) return 6;
  return 0;
}

// Finds libnccl.so.2 as an application linked against it would, and returns
// the ncclNet version it will ask weft for (0: newest).
int find_nccl(NodeReport& report) {
  void* nccl = dlopen("libnccl.so.2", RTLD_LAZY | RTLD_LOCAL);
  if (nccl == nullptr) {
    report.abi_reason = "no libnccl.so.2 on the library path: the newest weft exports";
    add(report, Severity::note, "nccl",
        "libnccl.so.2 is not on the library path (LD_LIBRARY_PATH, ld.so.cache); frameworks "
        "that bundle NCCL (PyTorch wheels) load their own, and the ncclNet version depends on it",
        "point LD_LIBRARY_PATH at the NCCL the job uses to check against it");
    return 0;
  }
  report.nccl_path = loaded_library_path(nccl);
  using GetVersion = int (*)(int*);
  auto get_version = reinterpret_cast<GetVersion>(dlsym(nccl, "ncclGetVersion"));
  int code = 0;
  if (get_version == nullptr || get_version(&code) != 0 || code <= 0) {
    report.abi_reason = "NCCL's version unknown: the newest weft exports";
    add(report, Severity::warning, "nccl",
        report.nccl_path + " does not answer ncclGetVersion: not checked against weft");
    return 0;
  }
  report.nccl_version = std::to_string(code / 10000) + "." + std::to_string(code / 100 % 100) +
                        "." + std::to_string(code % 100);
  // NCCL is not unloaded: its static state may not survive it.
  const int abi = abi_for_nccl(code);
  if (abi == 0) {
    report.abi_reason =
        "NCCL " + report.nccl_version + " predates every ncclNet version weft exports";
    add(report, Severity::failure, "nccl",
        "NCCL " + report.nccl_version + " looks for ncclNet v5 or older; weft exports v6..v12",
        "use NCCL 2.13 or newer");
    return 0;
  }
  report.abi_reason =
      "NCCL " + report.nccl_version + " looks for ncclNetPlugin_v" + std::to_string(abi) + " first";
  return abi;
}

// --- Loading the plugin as NCCL would ---------------------------------------

std::unique_ptr<NetClient> load_plugin(NodeReport& report, const CheckOptions& options, int abi) {
  std::vector<std::string> candidates;
  const char* names = std::getenv("NCCL_NET_PLUGIN");
  if (!options.plugin.empty()) {
    candidates.push_back(options.plugin);
  } else if (names != nullptr && names[0] != '\0') {
    // NCCL 2.27+: each name as given, then as libnccl-net-<name>.so.
    for (const std::string& name : split(names, ',')) {
      if (name == "none") continue;
      candidates.push_back(name);
      candidates.push_back("libnccl-net-" + name + ".so");
    }
    if (candidates.empty()) {
      add(report, Severity::failure, "nccl",
          std::string("NCCL_NET_PLUGIN=") + names + ": NCCL loads no external plugin",
          "export NCCL_NET_PLUGIN=weft");
      return nullptr;
    }
  } else {
    add(report, Severity::warning, "nccl",
        "NCCL_NET_PLUGIN is not set: NCCL then tries only libnccl-net.so and uses its own "
        "transports when that is not weft",
        "export NCCL_NET_PLUGIN=weft");
    candidates.push_back("libnccl-net-weft.so");
  }
#ifdef WEFT_INSTALLED_PLUGIN_PATH
  if (options.plugin.empty()) {
    const std::string beside = file_beside_program(WEFT_INSTALLED_PLUGIN_PATH);
    if (!beside.empty()) candidates.push_back(beside);
  }
#endif
  std::string errors;
  for (const std::string& candidate : candidates) {
    std::string error;
    auto client = NetClient::load(candidate, abi, error);
    if (client == nullptr) {
      errors += (errors.empty() ? "" : "; ") + candidate + ": " + error;
      continue;
    }
    report.plugin_path = client->library_path();
    if (report.plugin_path.empty()) report.plugin_path = candidate;
    report.abi_version = client->abi_version();
    report.plugin_name = client->plugin_name() != nullptr ? client->plugin_name() : "";
    if (report.plugin_name != "weft") {
      add(report, Severity::warning, "plugin",
          report.plugin_path + " is the plugin '" + report.plugin_name + "', not weft",
          "set NCCL_NET_PLUGIN=weft");
    }
    return client;
  }
  add(report, Severity::failure, "plugin", "no plugin could be loaded: " + errors,
      "install weft's package, or add the directory of libnccl-net-weft.so to LD_LIBRARY_PATH");
  return nullptr;
}

// --- Libraries, limits, memory, variables ---------------------------------

std::string fabric_version(const std::string& path) {
  void* handle = dlopen(path.c_str(), RTLD_LAZY | RTLD_NOLOAD);
  if (handle == nullptr) return {};
  using Version = uint32_t (*)();
  auto version = reinterpret_cast<Version>(dlsym(handle, "fi_version"));
  std::string out;
  if (version != nullptr) {
    const uint32_t v = version();
    out = std::to_string(v >> 16) + "." + std::to_string(v & 0xffff);
  }
  dlclose(handle);
  return out;
}

// libibverbs.so.1.14.44.0 is rdma-core 44.
std::string rdma_core_version(const std::string& path) {
  const auto slash = path.rfind('/');
  const std::vector<std::string> parts = split(path.substr(slash + 1), '.');
  if (parts.size() == 6 && parts[0] == "libibverbs") return "rdma-core " + parts[4];
  return {};
}

int note_library(dl_phdr_info* info, size_t, void* data) {
  auto* report = static_cast<NodeReport*>(data);
  if (info->dlpi_name == nullptr || info->dlpi_name[0] == '\0') return 0;
  const std::string path = info->dlpi_name;
  const std::string base = path.substr(path.rfind('/') + 1);
  std::string role;
  if (base.rfind("libfabric.so", 0) == 0) role = "libfabric";
  if (base.rfind("libibverbs.so", 0) == 0 || base.rfind("libsoftverbs.so", 0) == 0)
    role = "libibverbs";
  if (base.rfind("libefa.so", 0) == 0) role = "libefa";
  if (base.rfind("libcuda.so", 0) == 0 || base.rfind("libsoftcuda", 0) == 0) role = "libcuda";
  if (role.empty()) return 0;
  std::string real = sysfs::realpath_of(path);
  if (real.empty()) real = path;
  for (const LoadedLibrary& known : report->libraries) {
    if (known.path == real) return 0;
  }
  std::string version = role == "libfabric"    ? fabric_version(path)
                        : role == "libibverbs" ? rdma_core_version(real)
                                               : std::string();
  report->libraries.push_back({role, real, version});
  return 0;
}

std::string limit_text(rlim_t value) {
  return value == RLIM_INFINITY ? "unlimited" : std::to_string(value);
}

void read_limits(NodeReport& report) {
  rlimit memlock{};
  if (getrlimit(RLIMIT_MEMLOCK, &memlock) == 0) {
    report.limits.push_back(
        {"memlock", limit_text(memlock.rlim_cur), limit_text(memlock.rlim_max)});
  }
  rlimit files{};
  if (getrlimit(RLIMIT_NOFILE, &files) == 0) {
    report.limits.push_back({"nofile", limit_text(files.rlim_cur), limit_text(files.rlim_max)});
    // NCCL opens sockets and proxies per peer; weft a few per process and
    // one link per peer process (docs/scale.md).
    if (files.rlim_cur != RLIM_INFINITY && files.rlim_cur < 65536) {
      add(report, Severity::warning, "limits",
          "open files are limited to " + std::to_string(files.rlim_cur) +
              " (soft): jobs over hundreds of nodes open more (NCCL's sockets and proxies, one "
              "weft link per peer process)",
          "ulimit -n 1048576 in the job's launcher, or nofile in /etc/security/limits.conf");
    }
  }
  std::ifstream meminfo("/proc/meminfo");
  std::string key;
  long value = 0;
  for (std::string line; std::getline(meminfo, line);) {
    std::istringstream fields(line);
    if (!(fields >> key >> value)) continue;
    if (key == "HugePages_Total:") report.hugepages_total = value;
    if (key == "HugePages_Free:") report.hugepages_free = value;
    if (key == "Hugepagesize:") report.hugepage_kib = value;
  }
  std::ifstream thp("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string modes;
  if (std::getline(thp, modes)) {
    const auto open = modes.find('[');
    const auto close = modes.find(']');
    if (open != std::string::npos && close > open)
      report.transparent_hugepages = modes.substr(open + 1, close - open - 1);
  }
}

// Whether registrations pin memory here: they do unless every NIC weft
// opened belongs to one of libfabric's software providers (tcp, shm, ...).
// The libfabric transport names each NIC's provider at init ("NIC 0: lo
// (provider tcp;ofi_rxm, ..."); the native verbs transport opens hardware.
bool pins_memory(const NodeReport& report) {
  bool software_only = false;
  for (const LogLine& line : report.log) {
    if (line.text.rfind("NIC ", 0) != 0) continue;
    const auto at = line.text.find("(provider ");
    if (at == std::string::npos) return true;
    const auto start = at + std::strlen("(provider ");
    const std::string provider = line.text.substr(start, line.text.find(',', start) - start);
    if (is_rdma_provider(provider)) return true;
    software_only = true;
  }
  return !software_only && !report.devices.empty();
}

// After the devices are known: whether the limit matters depends on them.
void check_memlock(NodeReport& report) {
  rlimit memlock{};
  if (getrlimit(RLIMIT_MEMLOCK, &memlock) != 0 || memlock.rlim_cur == RLIM_INFINITY) return;
  const bool pins = pins_memory(report);
  add(report, pins ? Severity::warning : Severity::note, "limits",
      "locked memory is limited to " + std::to_string(memlock.rlim_cur / 1024) +
          " KiB (soft): registering NCCL's buffers pins them, and registrations past the limit "
          "fail" +
          (pins ? "" : " (not used by this node's software provider)"),
      "ulimit -l unlimited in the job's launcher, memlock unlimited in "
      "/etc/security/limits.conf, LimitMEMLOCK=infinity for systemd services");
}

// Memory regions at scale: NCCL registers, per peer a process talks to over
// the network and per channel, a buffer per direction and protocol, and
// weft a region of its own per comm. kRegionsPerPeer estimates that at
// NCCL's default of 2 channels per peer (docs/node-check.md); a device that
// allows too few fails registrations in large alltoall jobs.
constexpr long long kRegionsPerPeer = 16;
constexpr long long kPeersWanted = 1024;

void check_region_limits(NodeReport& report) {
  if (!pins_memory(report)) return;  // software providers register nothing real
  for (const RegionLimit& limit : report.region_limits) {
    if (limit.count < 0 || limit.count >= kRegionsPerPeer * kPeersWanted) continue;
    add(report, Severity::warning, "limits",
        limit.device + " allows " + std::to_string(limit.count) + " memory regions (" +
            limit.source + "): at about " + std::to_string(kRegionsPerPeer) +
            " per network peer (NCCL's buffers at 2 channels, and weft's own per comm), enough "
            "for about " +
            std::to_string(limit.count / kRegionsPerPeer) +
            " peers per process, fewer than large alltoall jobs reach",
        "keep WEFT_MR_CACHE=1 (registrations of the same pages shared); fewer channels per "
        "peer (NCCL_NCHANNELS_PER_NET_PEER); the device's own limit (mlx5: log_max_mkey in "
        "the firmware profile)");
  }
}

// Registered memory and fork(): with pages pinned for the NIC, a child that
// writes to them gets the parent's pages unless the kernel copies them
// (Linux 5.13+: rdma-core reports "unneeded") or the process called
// ibv_fork_init (RDMAV_FORK_SAFE=1). PyTorch's DataLoader workers fork.
void check_fork_safety(NodeReport& report) {
  std::string path;
  for (const LoadedLibrary& library : report.libraries) {
    if (library.role == "libibverbs") path = library.path;
  }
  if (path.empty()) return;
  void* handle = dlopen(path.c_str(), RTLD_LAZY | RTLD_NOLOAD);
  if (handle == nullptr) return;
  using ForkStatus = int (*)();
  auto status = reinterpret_cast<ForkStatus>(dlsym(handle, "ibv_is_fork_initialized"));
  if (status != nullptr) {
    switch (status()) {
      case 0:
        report.fork_safety = "disabled";
        break;
      case 1:
        report.fork_safety = "enabled";
        break;
      case 2:
        report.fork_safety = "unneeded";
        break;
      default:
        report.fork_safety = "unknown";
    }
  }
  dlclose(handle);
  if (report.fork_safety == "disabled" && pins_memory(report)) {
    add(report, Severity::warning, "limits",
        "fork() is not safe with registered memory here (rdma-core: fork support disabled, and "
        "the kernel does not copy pinned pages): a child process that touches a registered "
        "buffer (PyTorch DataLoader workers) can corrupt it or crash",
        "export RDMAV_FORK_SAFE=1 in the job, or run Linux 5.13 or newer");
  }
}

bool reported_variable(const std::string& name) {
  for (const char* prefix : {"NCCL_", "FI_", "RDMAV_", "IBV_", "UCX_"}) {
    if (name.rfind(prefix, 0) == 0) return true;
  }
  return name == "CUDA_VISIBLE_DEVICES" || name == "LD_LIBRARY_PATH";
}

// `params` null: the configuration is invalid (the environment alone).
void read_variables(NodeReport& report, const Params* params) {
  if (params != nullptr) {
    const EnvLookup env = [](const char* name) { return std::getenv(name); };
    const auto specs = param_specs();
    const std::vector<std::string> values = param_values(*params);
    for (size_t i = 0; i < specs.size(); ++i)
      report.parameters.push_back({specs[i].env_name, values[i], param_source(specs[i], env)});
  }
  for (char** entry = environ; entry != nullptr && *entry != nullptr; ++entry) {
    const std::string text = *entry;
    const auto equals = text.find('=');
    if (equals == std::string::npos) continue;
    const std::string name = text.substr(0, equals);
    if (reported_variable(name))
      report.environment.push_back({name, text.substr(equals + 1), "env"});
  }
}

// --- GPU memory, registered for real ------------------------------------

// Connects the plugin to itself on `device`: what regMr needs a comm for.
struct Loopback {
  NetClient& client;
  void* listen_comm = nullptr;
  void* send_comm = nullptr;
  void* recv_comm = nullptr;
  std::string error;

  Loopback(NetClient& c, int device) : client(c) {
    char handle[NCCL_NET_HANDLE_MAXSIZE] = {};
    if (client.listen(device, handle, &listen_comm) != ncclSuccess) {
      error = "listen failed";
      return;
    }
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (send_comm == nullptr || recv_comm == nullptr) {
      if (send_comm == nullptr && client.connect(device, handle, &send_comm) != ncclSuccess) {
        error = "connect to its own listener failed";
        return;
      }
      if (recv_comm == nullptr && client.accept(listen_comm, &recv_comm) != ncclSuccess) {
        error = "accept failed";
        return;
      }
      if (std::chrono::steady_clock::now() > deadline) {
        error = "connecting to its own listener took over 10 s";
        return;
      }
    }
  }
  ~Loopback() {
    if (send_comm != nullptr) client.close_send(send_comm);
    if (recv_comm != nullptr) client.close_recv(recv_comm);
    if (listen_comm != nullptr) client.close_listen(listen_comm);
  }
};

int read_numa_node(const std::string& device_path) {
  std::ifstream file(device_path + "/numa_node");
  int node = -1;
  return (file >> node) ? node : -1;
}

// Where the GPU sits in the PCI tree, and the weft device nearest to it.
void place_gpu(GpuCheck& gpu, const NodeReport& report, const std::string& sysfs_root) {
  if (gpu.pci_bus_id.empty()) return;
  gpu.pci_path = sysfs::realpath_of(sysfs_root + "/bus/pci/devices/" + gpu.pci_bus_id);
  if (gpu.pci_path.empty()) return;
  gpu.numa_node = read_numa_node(gpu.pci_path);
  PciRelation best;
  for (size_t d = 0; d < report.devices.size(); ++d) {
    if (report.devices[d].pci_path.empty()) continue;
    const PciRelation relation = pci_relation(gpu.pci_path, report.devices[d].pci_path);
    if (gpu.nearest_device < 0 || relation.nearer_than(best)) {
      best = relation;
      gpu.nearest_device = static_cast<int>(d);
    }
  }
  if (gpu.nearest_device >= 0) {
    gpu.nearest_relation = best.describe();
    gpu.nearest_shares_root = best.same_root;
    const int nic_node = read_numa_node(report.devices[gpu.nearest_device].pci_path);
    if (best.pci && !best.same_root)
      gpu.nearest_relation += nic_node >= 0 && nic_node == gpu.numa_node
                                  ? " (same NUMA node)"
                                  : " (NUMA node " + std::to_string(nic_node) + ")";
  }
}

void check_gpus(NodeReport& report, NetClient* client, const Params& params,
                const std::string& sysfs_root) {
  if (params.gpu == "off") {
    report.cuda_reason = "WEFT_GPU=off";
    return;
  }
  std::string reason;
  std::unique_ptr<cuda::Driver> driver = cuda::Driver::open(params.cuda_lib, &reason);
  if (driver == nullptr) {
    report.cuda_reason = reason;
    add(report, Severity::note, "gpu", "no usable CUDA driver (" + reason + "): host memory only");
    return;
  }
  report.cuda_library = driver->library();
  report.cuda_driver_version = driver->driver_version();
  int gpu_device = -1;
  for (size_t d = 0; d < report.devices.size() && gpu_device < 0; ++d) {
    if (report.devices[d].ptr_support & NCCL_PTR_CUDA) gpu_device = static_cast<int>(d);
  }
  if (driver->device_count() > 0 && gpu_device < 0 && !report.devices.empty()) {
    add(report, Severity::warning, "gpu",
        std::to_string(driver->device_count()) +
            " GPU(s), but no weft device registers GPU memory (ptrSupport has no CUDA): NCCL "
            "copies GPU data through host memory, at a fraction of the network's bandwidth",
        "libfabric: a CUDA-enabled build (FI_HMEM; Debian's 1.17 has none); native verbs: "
        "dma-buf (open GPU kernel modules, kernel 5.12+) or the nvidia-peermem module; the "
        "plugin's log above says which was missing");
  }
  for (int ordinal = 0; ordinal < driver->device_count(); ++ordinal) {
    GpuCheck gpu;
    gpu.ordinal = ordinal;
    gpu.pci_bus_id = driver->pci_bus_id(ordinal);
    place_gpu(gpu, report, sysfs_root);
    gpu.gdr_supported = driver->gdr_supported(ordinal);
    gpu.dmabuf_supported = driver->dmabuf_supported(ordinal);
    // Registered where NCCL would send its data: the nearest device, if it
    // takes GPU memory.
    gpu.device = gpu_device;
    if (gpu.nearest_device >= 0 &&
        (report.devices[gpu.nearest_device].ptr_support & NCCL_PTR_CUDA) != 0) {
      gpu.device = gpu.nearest_device;
    }
    if (client == nullptr || gpu_device < 0) {
      gpu.registration = "skipped: no weft device registers GPU memory";
      report.gpus.push_back(gpu);
      continue;
    }
    constexpr size_t kProbeBytes = 2u << 20;
    void* buffer = nullptr;
    std::string error;
    if (!driver->alloc(kProbeBytes, ordinal, &buffer, &error)) {
      gpu.registration = "could not allocate GPU memory: " + error;
      add(report, Severity::warning, "gpu",
          "GPU " + std::to_string(ordinal) + ": " + gpu.registration);
      report.gpus.push_back(gpu);
      continue;
    }
    {
      const size_t first_line = log_size(report.log);
      Loopback comms(*client, gpu.device);
      void* mhandle = nullptr;
      if (!comms.error.empty()) {
        gpu.registration = "no comm to register on: " + comms.error + ": " +
                           warnings_since(report.log, first_line);
      } else if (ncclResult_t r =
                     client->reg_mr(comms.send_comm, buffer, kProbeBytes, NCCL_PTR_CUDA, &mhandle);
                 r != ncclSuccess) {
        gpu.registration = std::string("regMr failed (") + nccl_result_name(r) +
                           "): " + warnings_since(report.log, first_line);
      } else {
        gpu.registered = true;
        gpu.registration = "ok";
        client->dereg_mr(comms.send_comm, mhandle);
      }
      if (!gpu.registered) {
        add(report, Severity::failure, "gpu",
            "GPU " + std::to_string(ordinal) + ": a " + std::to_string(kProbeBytes >> 20) +
                " MiB device buffer could not be registered on device " +
                std::to_string(gpu.device) + ": " + gpu.registration,
            "the plugin's warning names the cause (memlock limit, peer memory module, IOMMU/ACS)");
      }
    }
    driver->free(buffer, &error);
    report.gpus.push_back(gpu);
  }
  bool unplaced = false;
  for (const GpuCheck& gpu : report.gpus) unplaced = unplaced || gpu.nearest_device < 0;
  if (unplaced && !report.devices.empty()) {
    add(report, Severity::note, "gpu",
        "a GPU or every NIC has no place in this node's PCI tree (common on VMs): NCCL cannot "
        "pair GPUs with their nearest NICs from sysfs",
        "give NCCL the real layout with NCCL_TOPO_FILE (weft-info --topo, docs/topology.md)");
    return;
  }
  // Every GPU and NIC on a host bridge of its own: the flat tree of a VM
  // that hides its PCI switches.
  bool shared = false;
  for (const GpuCheck& gpu : report.gpus) shared = shared || gpu.nearest_shares_root;
  if (report.gpus.empty() || shared) return;
  if (const char* topo = std::getenv("NCCL_TOPO_FILE"); topo != nullptr && topo[0] != '\0') {
    const bool user_set = std::any_of(report.environment.begin(), report.environment.end(),
                                      [](const Variable& v) { return v.name == "NCCL_TOPO_FILE"; });
    add(report, Severity::note, "gpu",
        user_set ? std::string("no GPU shares a host bridge with a weft NIC; NCCL_TOPO_FILE=") +
                       topo + " gives NCCL the layout"
                 : "no GPU shares a host bridge with a weft NIC; weft's init points "
                   "NCCL_TOPO_FILE at the instance table's layout (WEFT_TOPO_FILE=auto; its INFO "
                   "line above names the row)");
    return;
  }
  add(report, Severity::warning, "gpu",
      "no GPU shares a host bridge with a weft NIC (a VM that hides its PCI switches?): NCCL "
      "sees every GPU-NIC pair as crossing the CPU and cannot tell which NIC is beside which GPU",
      "weft-info --topo -o FILE writes the layout (from the instance table where the VM hides "
      "it), then export NCCL_TOPO_FILE=FILE (docs/topology.md)");
}

}  // namespace

const char* severity_name(Severity severity) {
  switch (severity) {
    case Severity::note:
      return "note";
    case Severity::warning:
      return "warning";
    case Severity::failure:
      return "failure";
  }
  return "?";
}

int NodeReport::exit_status() const {
  int status = 0;
  for (const Finding& finding : findings) {
    if (finding.severity == Severity::failure) return 2;
    if (finding.severity == Severity::warning) status = 1;
  }
  return status;
}

const char* NodeReport::verdict() const {
  switch (exit_status()) {
    case 0:
      return "ready";
    case 1:
      return "warnings";
    default:
      return "not usable";
  }
}

NodeReport check_node(const CheckOptions& options) {
  NodeReport report;
#ifdef WEFT_VERSION_TEXT
  report.weft_version = WEFT_VERSION_TEXT;
#endif
  read_limits(report);
  Params params;
  std::string error;
  const bool valid = load_params(params, error);
  read_variables(report, valid ? &params : nullptr);
  if (!valid) {
    add(report, Severity::failure, "variables", "invalid configuration: " + error,
        "weft-info --params lists every parameter and what it accepts");
    return report;
  }
  const int abi = find_nccl(report);
  std::unique_ptr<NetClient> client = load_plugin(report, options, abi);
  {
    std::lock_guard<std::mutex> lock(log_mutex);
    log_sink = &report.log;
  }
  if (client != nullptr) {
    const ncclResult_t init = client->init(capture_log);
    report.init_result = nccl_result_name(init);
    if (init != ncclSuccess) {
      add(report, Severity::failure, "plugin",
          std::string("init failed (") + report.init_result + "): " + warnings_since(report.log, 0),
          "the plugin's warning names the cause; weft-info --params shows the settings");
      dl_iterate_phdr(note_library, &report);  // what it loaded, before it goes
      client.reset();
    }
  }
  read_candidates(report);
  read_region_limits(report);
  if (client != nullptr) {
    int count = 0;
    if (client->devices(&count) != ncclSuccess) count = 0;
    for (int d = 0; d < count; ++d) {
      NetDeviceInfo info;
      if (client->properties(d, &info) == ncclSuccess) report.devices.push_back(info);
    }
    if (report.devices.empty()) {
      add(report, Severity::failure, "devices",
          "weft reports no device: NCCL falls back to its own transports",
          "the plugin's log above says what it looked for; WEFT_TRANSPORT and WEFT_OFI_PROVIDER "
          "choose the transport");
    }
  }
  dl_iterate_phdr(note_library, &report);
  check_memlock(report);
  check_region_limits(report);
  check_fork_safety(report);
  if (options.gpu) check_gpus(report, client.get(), params, options.sysfs_root);
  dl_iterate_phdr(note_library, &report);  // libcuda, once opened
  client.reset();                          // finalizes (v11+) and unloads
  std::lock_guard<std::mutex> lock(log_mutex);
  log_sink = nullptr;
  return report;
}

}  // namespace weft::info
