#include "ofi/discovery/protocol_choice.h"

#include "ofi/discovery/provider_discovery.h"
#include "ofi/fabric/provider_quirks.h"
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
                             const std::string& matching, ProtocolChoice* choice) {
  const fi_info* info = device->info.get();
  std::string provider = info->fabric_attr->prov_name;
  InfoPtr variant;
  InfoPtr message_variant;
  if (setting != "tagged") {
    uint64_t caps =
        FI_RMA | FI_WRITE | FI_REMOTE_WRITE | FI_READ | FI_REMOTE_READ | (info->caps & FI_HMEM);
    uint64_t mr_mode = info->domain_attr->mr_mode & FI_MR_HMEM;
    // auto: only a fabric that has no FI_TAGGED is worth weft's matching.
    if (matching == "weft" || (matching == "auto" && is_efa_provider(provider))) {
      message_variant =
          find_message_variant(info, caps, mr_mode, matching == "auto" ? "efa-direct" : "");
      if (message_variant && message_variant->domain_attr->cq_data_size < 4) {
        message_variant.reset();
      }
    }
    // Each fi_getinfo costs (tcp lists every interface): ask only when needed.
    if (!message_variant) {
      variant = find_variant(info, caps, mr_mode);
      if (variant && variant->domain_attr->cq_data_size < 4) variant.reset();
    }
  }
  *choice = decide_protocol(setting, provider, variant != nullptr || message_variant != nullptr);
  if (setting == "rdma" && choice->protocol != Protocol::Rdma) {
    WEFT_WARN("%s: %s; use WEFT_OFI_PROTOCOL=tagged or auto on this provider",
              device->properties.name.c_str(), choice->reason.c_str());
    return ncclInvalidUsage;
  }
  if (choice->protocol == Protocol::Rdma && matching == "weft" && !message_variant) {
    WEFT_WARN(
        "%s: WEFT_OFI_TAG_MATCHING=weft, but %s offers no plain messages (FI_MSG) with RMA "
        "writes here; use WEFT_OFI_TAG_MATCHING=auto",
        device->properties.name.c_str(), provider.c_str());
    return ncclInvalidUsage;
  }
  if (choice->protocol == Protocol::Rdma) {
    if (message_variant) {
      choice->weft_matching = true;
      choice->reason +=
          std::string("; weft matches its messages on fabric ") +
          message_variant->fabric_attr->name +
          ((message_variant->caps & FI_TAGGED) == 0 ? ", which has no FI_TAGGED" : "") +
          ((message_variant->mode & FI_RX_CQ_DATA) != 0 ? ", remote writes consume a receive" : "");
      device->info = std::move(message_variant);
    } else {
      device->info = std::move(variant);
    }
  }
  WEFT_INFO(NCCL_INIT | NCCL_NET, "%s: %s protocol (%s)", device->properties.name.c_str(),
            protocol_name(choice->protocol), choice->reason.c_str());
  if (choice->protocol == Protocol::Rdma) {
    const std::string warning = unexpected_message_limit_warning(provider, fi_version());
    if (!warning.empty()) WEFT_WARN("%s: %s", device->properties.name.c_str(), warning.c_str());
  }
  return ncclSuccess;
}

}  // namespace weft::ofi
