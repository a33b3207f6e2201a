// weft-info --check: what NCCL will see from weft on this node, and whether
// the node is ready. It loads the plugin as NCCL would (the ncclNet version
// the NCCL on the library path looks for), records what weft says while it
// initialises, reads the devices' properties, registers a real GPU buffer
// where there is a GPU, and reads the limits, library versions and
// variables that decide whether large jobs work. docs/node-check.md
// describes the report and its JSON schema.
#pragma once

#include <string>
#include <vector>

#include "weft_client/net_client.h"

namespace weft::info {

// Bumped when a field changes meaning or goes away (adding one does not).
constexpr int kNodeCheckSchemaVersion = 1;

enum class Severity { note, warning, failure };
const char* severity_name(Severity severity);  // "note", "warning", "failure"

struct Finding {
  Severity severity = Severity::note;
  std::string topic;  // plugin, nccl, devices, gpu, limits, variables
  std::string text;   // what is wrong, with the numbers
  std::string fix;    // what to do ("" when nothing)
};

struct LogLine {
  std::string level;  // WARN, INFO, ...
  std::string text;
};

// A transport or libfabric provider weft considered at init, from its
// "candidate ..." log lines: what it chose and why it left the others.
struct Candidate {
  std::string kind;   // transport, provider
  std::string name;   // verbs, ofi; tcp;ofi_rxm, shm, efa, ...
  std::string where;  // rdma-core, libfabric; a provider's domains
  bool used = false;
  std::string reason;
};

struct LoadedLibrary {
  std::string role;     // libfabric, libibverbs, libcuda
  std::string path;     // as the dynamic loader resolved it
  std::string version;  // "1.17", "rdma-core 44", "" when unknown
};

// How many memory regions a device allows, as weft logged it at init.
struct RegionLimit {
  std::string device;
  long long count = -1;  // -1: the device states none
  std::string source;    // ibv_query_device max_mr, libfabric mr_cnt
};

struct Limit {
  std::string name;  // memlock, nofile
  std::string soft;  // a number or "unlimited"
  std::string hard;
};

struct Variable {
  std::string name;
  std::string value;
  std::string source;  // default, env, or the NCCL_* name that supplied it
};

struct GpuCheck {
  int ordinal = -1;
  std::string pci_bus_id;  // "0000:3b:00.0", empty when unknown
  std::string pci_path;    // its sysfs device path, empty when sysfs has none
  int numa_node = -1;
  // The weft device nearest in the PCI tree (-1: no device has a PCI path)
  // and how it sits relative to the GPU.
  int nearest_device = -1;
  std::string nearest_relation;
  bool nearest_shares_root = false;  // under the same host bridge as that device
  bool gdr_supported = false;
  bool dmabuf_supported = false;
  // A device buffer registered through the plugin on device `device`:
  // "ok", "skipped: ..." or the failure and the plugin's warning.
  int device = -1;
  bool registered = false;
  std::string registration;
};

struct NodeReport {
  std::string weft_version;
  // The plugin.
  std::string plugin_path;  // as loaded; empty when it could not be
  int abi_version = 0;
  std::string abi_reason;
  std::string plugin_name;
  std::string init_result;  // ncclSuccess, ...
  std::vector<LogLine> log;
  std::vector<Candidate> candidates;  // in the order weft considered them
  std::vector<NetDeviceInfo> devices;
  // NCCL on the library path.
  std::string nccl_path;     // empty: not found
  std::string nccl_version;  // "2.28.9"
  std::vector<LoadedLibrary> libraries;
  // Limits and memory.
  std::vector<Limit> limits;
  std::vector<RegionLimit> region_limits;
  // rdma-core's ibv_is_fork_initialized(): "unneeded" (the kernel keeps
  // registered pages safe across fork), "enabled", "disabled", or "" when
  // libibverbs is not loaded.
  std::string fork_safety;
  long hugepages_total = -1;
  long hugepages_free = -1;
  long hugepage_kib = -1;
  std::string transparent_hugepages;  // the selected mode, "" when unknown
  // Variables.
  std::vector<Variable> parameters;   // every WEFT_* parameter
  std::vector<Variable> environment;  // NCCL_*, FI_*, RDMAV_*, IBV_*, CUDA_VISIBLE_DEVICES set
  // GPUs.
  std::string cuda_library;  // empty: no usable driver
  std::string cuda_reason;   // why not
  int cuda_driver_version = 0;
  std::vector<GpuCheck> gpus;

  std::vector<Finding> findings;

  // 0 ready, 1 warnings, 2 not usable.
  int exit_status() const;
  const char* verdict() const;  // "ready", "warnings", "not usable"
};

struct CheckOptions {
  std::string plugin;  // empty: NCCL's search (NCCL_NET_PLUGIN), then the install path
  bool gpu = true;     // register a GPU buffer on each GPU
  // Where GPUs' PCI devices are looked up (bus/pci/devices/<id>): /sys, or
  // a recorded tree of another node's shape.
  std::string sysfs_root = "/sys";
};

NodeReport check_node(const CheckOptions& options);

// The report for people, and as JSON (schema version kNodeCheckSchemaVersion).
std::string node_report_text(const NodeReport& report);
std::string node_report_json(const NodeReport& report);

}  // namespace weft::info
