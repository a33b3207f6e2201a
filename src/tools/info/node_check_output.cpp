// The node check's report, for people and as JSON (docs/node-check.md).
#include <cstdio>
#include <sstream>

#include "node_check.h"
#include "weft_client/json_text.h"

namespace weft::info {
namespace {

std::string pointer_kinds(int support) {
  std::string out;
  if (support & NCCL_PTR_HOST) out += "HOST";
  if (support & NCCL_PTR_CUDA) out += out.empty() ? "CUDA" : "|CUDA";
  if (support & NCCL_PTR_DMABUF) out += out.empty() ? "DMABUF" : "|DMABUF";
  return out.empty() ? "none" : out;
}

std::string or_dash(const std::string& text) {
  return text.empty() ? "-" : text;
}

std::string gpu_line(const GpuCheck& gpu) {
  std::ostringstream out;
  out << "GPU " << gpu.ordinal << " (" << or_dash(gpu.pci_bus_id) << ", NUMA node " << gpu.numa_node
      << "): nearest device ";
  if (gpu.nearest_device >= 0)
    out << gpu.nearest_device << ", " << gpu.nearest_relation;
  else
    out << "unknown (no PCI path)";
  out << "\n    GPUDirect RDMA " << (gpu.gdr_supported ? "yes" : "no") << ", dma-buf "
      << (gpu.dmabuf_supported ? "yes" : "no") << "; registration";
  if (gpu.device >= 0) out << " on device " << gpu.device;
  out << ": " << gpu.registration;
  return out.str();
}

}  // namespace

std::string node_report_text(const NodeReport& report) {
  std::ostringstream out;
  out << "weft node check: " << report.verdict() << "\n";

  out << "\nPlugin\n";
  out << "  loaded     " << or_dash(report.plugin_path);
  if (!report.plugin_path.empty()) {
    out << " ('" << report.plugin_name << "', ncclNetPlugin_v" << report.abi_version << ")";
  }
  out << "\n  why        " << or_dash(report.abi_reason) << "\n";
  if (!report.weft_version.empty()) out << "  weft-info  " << report.weft_version << "\n";
  out << "  init       " << or_dash(report.init_result) << "\n";
  if (!report.candidates.empty()) out << "  considered:\n";
  for (const Candidate& c : report.candidates) {
    out << "    " << (c.used ? "used      " : "not used  ") << c.kind << " " << c.name << " ["
        << c.where << "]: " << c.reason << "\n";
  }
  if (!report.log.empty()) out << "  what weft logged during the check:\n";
  for (const LogLine& line : report.log) out << "    " << line.level << " " << line.text << "\n";

  out << "\nDevices (" << report.devices.size() << ")\n";
  for (size_t d = 0; d < report.devices.size(); ++d) {
    const NetDeviceInfo& dev = report.devices[d];
    out << "  " << d << "  " << dev.name << "  pciPath " << or_dash(dev.pci_path) << "\n"
        << "     speed " << dev.speed_mbps << " Mb/s, port " << dev.port << ", latency "
        << dev.latency_us << " us, ptrSupport " << pointer_kinds(dev.ptr_support)
        << ", regIsGlobal " << dev.reg_is_global << ", forceFlush " << dev.force_flush << "\n"
        << "     maxComms " << dev.max_comms << ", maxRecvs " << dev.max_recvs << ", maxP2pBytes "
        << dev.max_p2p_bytes << ", guid 0x" << std::hex << dev.guid << std::dec;
    if (!dev.vdevs.empty()) {
      out << ", vProps";
      for (int v : dev.vdevs) out << " " << v;
    }
    if (dev.rail_id >= 0) out << ", railId " << dev.rail_id << ", planeId " << dev.plane_id;
    out << "\n";
  }

  out << "\nLibraries\n";
  out << "  NCCL       " << or_dash(report.nccl_path);
  if (!report.nccl_version.empty()) out << " (" << report.nccl_version << ")";
  out << "\n";
  for (const LoadedLibrary& library : report.libraries) {
    out << "  " << library.role << std::string(11 - std::min<size_t>(10, library.role.size()), ' ')
        << library.path;
    if (!library.version.empty()) out << " (" << library.version << ")";
    out << "\n";
  }

  out << "\nGPUs\n";
  if (report.cuda_library.empty()) {
    out << "  none usable: " << or_dash(report.cuda_reason) << "\n";
  } else {
    out << "  driver     " << report.cuda_library << " (CUDA " << report.cuda_driver_version / 1000
        << "." << report.cuda_driver_version % 1000 / 10 << "), " << report.gpus.size()
        << " GPU(s)\n";
    for (const GpuCheck& gpu : report.gpus) out << "  " << gpu_line(gpu) << "\n";
  }

  out << "\nLimits and memory\n";
  for (const Limit& limit : report.limits) {
    out << "  " << limit.name << std::string(11 - std::min<size_t>(10, limit.name.size()), ' ')
        << "soft " << limit.soft << ", hard " << limit.hard << "\n";
  }
  for (const RegionLimit& limit : report.region_limits) {
    out << "  regions    " << limit.device << ": "
        << (limit.count < 0 ? std::string("not stated") : std::to_string(limit.count)) << " ("
        << limit.source << ")\n";
  }
  out << "  fork       " << (report.fork_safety.empty() ? "-" : report.fork_safety)
      << " (rdma-core's fork support with registered memory)\n";
  out << "  hugepages  " << report.hugepages_total << " of " << report.hugepage_kib << " KiB, "
      << report.hugepages_free << " free; transparent: " << or_dash(report.transparent_hugepages)
      << "\n";

  out << "\nVariables (WEFT_* not at their default, and NCCL_*, FI_*, RDMAV_*, IBV_*, ...)\n";
  size_t shown = 0;
  for (const Variable& v : report.parameters) {
    if (v.source == "default") continue;
    out << "  " << v.name << "=" << v.value << " (from " << v.source << ")\n";
    ++shown;
  }
  for (const Variable& v : report.environment) {
    out << "  " << v.name << "=" << v.value << "\n";
    ++shown;
  }
  if (shown == 0) out << "  none set\n";

  out << "\nFindings\n";
  if (report.findings.empty()) out << "  none\n";
  for (const Finding& finding : report.findings) {
    out << "  " << severity_name(finding.severity) << " [" << finding.topic << "] " << finding.text
        << "\n";
    if (!finding.fix.empty()) out << "    fix: " << finding.fix << "\n";
  }
  out << "\n" << report.verdict() << " (exit status " << report.exit_status() << ")\n";
  return out.str();
}

std::string node_report_json(const NodeReport& report) {
  JsonWriter json;
  json.begin_object();
  json.value("schema", "weft-node-check").value("schema_version", kNodeCheckSchemaVersion);
  json.value("verdict", report.verdict()).value("exit_status", report.exit_status());
  json.value("weft_version", report.weft_version);

  json.begin_object("plugin");
  if (report.plugin_path.empty())
    json.null("path");
  else
    json.value("path", report.plugin_path);
  json.value("name", report.plugin_name).value("abi_version", report.abi_version);
  json.value("abi_reason", report.abi_reason).value("init_result", report.init_result);
  json.begin_array("log");
  for (const LogLine& line : report.log) {
    json.begin_object().value("level", line.level).value("text", line.text).end_object();
  }
  json.end_array();
  json.begin_array("candidates");
  for (const Candidate& c : report.candidates) {
    json.begin_object().value("kind", c.kind).value("name", c.name).value("where", c.where);
    json.value("used", c.used).value("reason", c.reason).end_object();
  }
  json.end_array().end_object();

  json.begin_array("devices");
  for (const NetDeviceInfo& dev : report.devices) {
    json.begin_object().value("name", dev.name);
    if (dev.pci_path.empty())
      json.null("pci_path");
    else
      json.value("pci_path", dev.pci_path);
    // A string: 64-bit values lose bits as JSON numbers in many readers.
    char guid[24];
    std::snprintf(guid, sizeof(guid), "0x%016llx", static_cast<unsigned long long>(dev.guid));
    json.value("guid", guid).value("ptr_support", pointer_kinds(dev.ptr_support));
    json.value("reg_is_global", dev.reg_is_global).value("force_flush", dev.force_flush);
    json.value("speed_mbps", dev.speed_mbps).value("port", dev.port);
    json.value("latency_us", static_cast<double>(dev.latency_us));
    json.value("max_comms", dev.max_comms).value("max_recvs", dev.max_recvs);
    json.value("max_p2p_bytes", static_cast<uint64_t>(dev.max_p2p_bytes));
    json.begin_array("vdevs");
    for (int v : dev.vdevs) json.value(nullptr, v);
    json.end_array();
    json.value("rail_id", dev.rail_id).value("plane_id", dev.plane_id);
    json.end_object();
  }
  json.end_array();

  json.begin_object("nccl");
  if (report.nccl_path.empty())
    json.null("path").null("version");
  else
    json.value("path", report.nccl_path).value("version", report.nccl_version);
  json.end_object();

  json.begin_array("libraries");
  for (const LoadedLibrary& library : report.libraries) {
    json.begin_object().value("role", library.role).value("path", library.path);
    json.value("version", library.version).end_object();
  }
  json.end_array();

  json.begin_object("gpus");
  if (report.cuda_library.empty())
    json.null("driver");
  else
    json.value("driver", report.cuda_library);
  json.value("driver_version", report.cuda_driver_version).value("reason", report.cuda_reason);
  json.begin_array("devices");
  for (const GpuCheck& gpu : report.gpus) {
    json.begin_object().value("ordinal", gpu.ordinal).value("pci_bus_id", gpu.pci_bus_id);
    json.value("pci_path", gpu.pci_path).value("numa_node", gpu.numa_node);
    json.value("nearest_net_device", gpu.nearest_device);
    json.value("nearest_relation", gpu.nearest_relation).value("gdr_supported", gpu.gdr_supported);
    json.value("dmabuf_supported", gpu.dmabuf_supported).value("net_device", gpu.device);
    json.value("registered", gpu.registered).value("registration", gpu.registration);
    json.end_object();
  }
  json.end_array().end_object();

  json.begin_object("limits");
  for (const Limit& limit : report.limits) {
    json.begin_object(limit.name.c_str()).value("soft", limit.soft).value("hard", limit.hard);
    json.end_object();
  }
  json.value("hugepages_total", static_cast<int64_t>(report.hugepages_total));
  json.value("hugepages_free", static_cast<int64_t>(report.hugepages_free));
  json.value("hugepage_kib", static_cast<int64_t>(report.hugepage_kib));
  json.value("transparent_hugepages", report.transparent_hugepages);
  json.value("fork_safety", report.fork_safety);
  json.begin_array("memory_regions");
  for (const RegionLimit& limit : report.region_limits) {
    json.begin_object().value("device", limit.device);
    if (limit.count < 0)
      json.null("limit");
    else
      json.value("limit", static_cast<int64_t>(limit.count));
    json.value("source", limit.source).end_object();
  }
  json.end_array();
  json.end_object();

  json.begin_array("parameters");
  for (const Variable& v : report.parameters) {
    json.begin_object().value("name", v.name).value("value", v.value).value("source", v.source);
    json.end_object();
  }
  json.end_array();
  json.begin_array("environment");
  for (const Variable& v : report.environment) {
    json.begin_object().value("name", v.name).value("value", v.value).end_object();
  }
  json.end_array();

  json.begin_array("findings");
  for (const Finding& finding : report.findings) {
    json.begin_object().value("severity", severity_name(finding.severity));
    json.value("topic", finding.topic).value("text", finding.text).value("fix", finding.fix);
    json.end_object();
  }
  json.end_array();
  json.end_object();
  return json.text();
}

}  // namespace weft::info
