#include "ofi/protocol_choice.h"

#include "weft/log.h"

namespace weft::ofi {

ProtocolChoice decide_protocol(const std::string& setting, const std::string& provider,
                               bool rdma_capable) {
  ProtocolChoice choice;
  if (setting == "tagged") {
    choice.reason = "WEFT_OFI_PROTOCOL=tagged";
    return choice;
  }
  if (setting == "rdma") {
    choice.protocol = rdma_capable ? Protocol::Rdma : Protocol::Tagged;
    choice.reason = rdma_capable ? "WEFT_OFI_PROTOCOL=rdma"
                                 : "WEFT_OFI_PROTOCOL=rdma, but " + provider +
                                       " offers no RMA writes with remote CQ data here";
    return choice;
  }
  if (!rdma_capable) {
    choice.reason = provider + " offers no RMA writes with remote CQ data";
  } else if (!is_rdma_provider(provider)) {
    // Software providers emulate RMA over the same byte stream: the extra
    // clear-to-send costs more than it saves.
    choice.reason = provider + " is a software provider (its RMA is emulated)";
  } else {
    choice.protocol = Protocol::Rdma;
    choice.reason = provider + " offers RMA writes with remote CQ data";
  }
  return choice;
}

ncclResult_t choose_protocol(DiscoveredDevice* device, const std::string& setting,
                             ProtocolChoice* choice) {
  const fi_info* info = device->info.get();
  std::string provider = info->fabric_attr->prov_name;
  InfoPtr variant;
  if (setting != "tagged") {
    uint64_t caps =
        FI_RMA | FI_WRITE | FI_REMOTE_WRITE | FI_READ | FI_REMOTE_READ | (info->caps & FI_HMEM);
    variant = find_variant(info, caps, info->domain_attr->mr_mode & FI_MR_HMEM);
    if (variant && variant->domain_attr->cq_data_size < 4) variant.reset();
  }
  *choice = decide_protocol(setting, provider, variant != nullptr);
  if (setting == "rdma" && choice->protocol != Protocol::Rdma) {
    WEFT_WARN("%s: %s; use WEFT_OFI_PROTOCOL=tagged or auto on this provider",
              device->properties.name.c_str(), choice->reason.c_str());
    return ncclInvalidUsage;
  }
  if (choice->protocol == Protocol::Rdma) device->info = std::move(variant);
  WEFT_INFO(NCCL_INIT | NCCL_NET, "%s: %s protocol (%s)", device->properties.name.c_str(),
            protocol_name(choice->protocol), choice->reason.c_str());
  return ncclSuccess;
}

}  // namespace weft::ofi
