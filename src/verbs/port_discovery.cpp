#include "verbs/port_discovery.h"

#include <cerrno>
#include <cstring>
#include <string_view>

#include "core/sysfs.h"
#include "verbs/hca_filter.h"
#include "weft/log.h"

namespace weft::verbs {
namespace {

// EFA devices are named rdmapXsY on EC2 (efa_N in some images): the kernel
// driver behind the device says it, whatever the name.
bool is_efa_device(const ibv_device& device, const std::string& name) {
  if (std::string_view(name).substr(0, 3) == "efa") return true;
  std::string driver = sysfs::realpath_of(std::string(device.ibdev_path) + "/device/driver");
  return !driver.empty() && driver.substr(driver.rfind('/') + 1) == "efa";
}

}  // namespace

bool discover_ports(const Params& params, const cuda::Driver* cuda, DiscoveredPorts* out,
                    std::string* reason) {
  HcaFilter filter;
  std::string error;
  if (!HcaFilter::parse(params.ib_hca, &filter, &error)) {
    *reason = "WEFT_IB_HCA/NCCL_IB_HCA \"" + params.ib_hca + "\": " + error;
    return false;
  }
  std::shared_ptr<const Ibverbs> ibverbs = Ibverbs::load(params.ibverbs_lib, reason);
  if (!ibverbs) return false;
  const IbverbsApi& api = ibverbs->api();
  int count = 0;
  ibv_device** list = api.get_device_list(&count);
  if (list == nullptr) {
    out->notes.push_back(std::string("ibv_get_device_list failed: ") + std::strerror(errno));
    return true;
  }
  struct Candidate {
    std::string name;
    int port;
  };
  std::vector<Candidate> candidates;
  for (int d = 0; d < count; ++d) {
    ibv_device* device = list[d];
    std::string name = api.get_device_name(device);
    if (is_efa_device(*device, name)) {
      ++out->efa_devices;
      out->notes.push_back(name + ": EFA, served through libfabric");
      continue;
    }
    if (device->transport_type != IBV_TRANSPORT_IB) {
      out->notes.push_back(name + ": not an InfiniBand/RoCE device (transport " +
                           std::to_string(device->transport_type) + ")");
      continue;
    }
    ibv_context* context = api.open_device(device);
    if (context == nullptr) {
      out->notes.push_back(name + ": ibv_open_device failed: " + std::strerror(errno));
      continue;
    }
    ibv_device_attr attr{};
    if (api.query_device(context, &attr) != 0) attr.phys_port_cnt = 0;
    for (int port = 1; port <= attr.phys_port_cnt; ++port) {
      ibv_port_attr port_attr{};
      if (api.query_port(context, static_cast<uint8_t>(port), &port_attr) != 0) continue;
      std::string where = name + ":" + std::to_string(port);
      if (port_attr.state != IBV_PORT_ACTIVE) {
        out->notes.push_back(where + ": not active");
        continue;
      }
      if (port_attr.link_layer != IBV_LINK_LAYER_INFINIBAND &&
          port_attr.link_layer != IBV_LINK_LAYER_ETHERNET &&
          port_attr.link_layer != IBV_LINK_LAYER_UNSPECIFIED) {
        out->notes.push_back(where + ": unknown link layer");
        continue;
      }
      if (!filter.selects(name, port)) {
        out->notes.push_back(where + ": not selected by WEFT_IB_HCA/NCCL_IB_HCA");
        continue;
      }
      candidates.push_back({name, port});
    }
    api.close_device(context);
  }
  api.free_device_list(list);
  for (const Candidate& candidate : candidates) {
    int ports_of_device = 0;
    for (const Candidate& other : candidates) ports_of_device += other.name == candidate.name;
    PortId id;
    id.device_name = candidate.name;
    id.port = candidate.port;
    // One name per port: the device's own where it has one port in use.
    id.nccl_name = ports_of_device > 1 ? candidate.name + ":" + std::to_string(candidate.port)
                                       : candidate.name;
    std::string why;
    std::unique_ptr<OpenPort> port = OpenPort::open(ibverbs, id, params, cuda, &why);
    std::string where = candidate.name + ":" + std::to_string(candidate.port);
    if (!port) {
      out->notes.push_back(where + ": " + why);
      WEFT_WARN("verbs device %s not used: %s", where.c_str(), why.c_str());
      continue;
    }
    out->notes.push_back(where + ": used as " + id.nccl_name);
    out->ports.push_back(std::move(port));
  }
  return true;
}

}  // namespace weft::verbs
