#include "ofi/discovery/provider_discovery.h"

#include <rdma/fi_errno.h>

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <set>
#include <sstream>

#include "core/provider_names.h"
#include "core/string_split.h"
#include "core/sysfs.h"
#include "ofi/discovery/hash.h"
#include "weft/log.h"

namespace weft::ofi {
namespace {

constexpr uint64_t kMaxMessageBytes = 1ull << 40;  // NCCL's limit for maxP2pBytes

// Every provider libfabric offered and what became of it, one INFO line
// each ("candidate provider NAME [DOMAINS]: used|not used: REASON"), which
// weft-info --check reads back. A provider is used when any of its domains
// is.
class CandidateLog {
 public:
  void use(const std::string& prov, const std::string& domain, const std::string& reason) {
    Entry& entry = find(prov);
    if (!listed(entry.used, domain)) entry.used.push_back(domain);
    entry.used_reason = reason;
  }
  void reject(const std::string& prov, const std::string& domain, const std::string& reason) {
    Entry& entry = find(prov);
    for (const auto& [d, r] : entry.rejected) {
      if (d == domain) return;  // the first reason for a domain stands
    }
    entry.rejected.emplace_back(domain, reason);
  }
  void log() const {
    for (const Entry& e : entries_) {
      std::string used_domains, other_domains, reasons;
      for (const std::string& d : e.used) used_domains += (used_domains.empty() ? "" : ",") + d;
      for (const auto& [d, r] : e.rejected) {
        if (listed(e.used, d)) continue;  // another variant on it is used
        other_domains += (other_domains.empty() ? "" : ",") + d;
        if (reasons.find(r) == std::string::npos) reasons += (reasons.empty() ? "" : "; ") + r;
      }
      // A provider used on some domains and not on others says why not.
      const bool used = !e.used.empty();
      const std::string reason = !used ? reasons
                                 : other_domains.empty()
                                     ? e.used_reason
                                     : e.used_reason + "; not on " + other_domains + ": " + reasons;
      WEFT_INFO(NCCL_INIT, "candidate provider %s [%s]: %s: %s", e.prov.c_str(),
                (used ? used_domains : other_domains).c_str(), used ? "used" : "not used",
                reason.c_str());
    }
  }

 private:
  struct Entry {
    std::string prov;
    std::vector<std::string> used;
    std::string used_reason;
    std::vector<std::pair<std::string, std::string>> rejected;  // domain, reason
  };
  static bool listed(const std::vector<std::string>& list, const std::string& domain) {
    return std::find(list.begin(), list.end(), domain) != list.end();
  }
  Entry& find(const std::string& prov) {
    for (Entry& e : entries_) {
      if (e.prov == prov) return e;
    }
    entries_.push_back(Entry{prov, {}, {}, {}});
    return entries_.back();
  }
  std::vector<Entry> entries_;
};

}  // namespace

InfoPtr make_hints(const std::string& provider, uint64_t extra_caps, uint64_t extra_mr_mode) {
  InfoPtr hints(fi_allocinfo());
  if (!hints) return hints;
  hints->caps = FI_TAGGED | FI_SEND | FI_RECV | extra_caps;
  hints->mode = FI_CONTEXT | FI_CONTEXT2;
  hints->ep_attr->type = FI_EP_RDM;
  // Every mode an RDM provider may ask for (EFA: LOCAL, VIRT_ADDR, ALLOCATED,
  // PROV_KEY; cxi and others: ENDPOINT). weft registers every buffer NCCL
  // gives it and passes descriptors everywhere, so all of them are handled.
  // FI_MR_RAW is not: weft exchanges no keys yet.
  hints->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY |
                                FI_MR_ENDPOINT | extra_mr_mode;
  hints->domain_attr->threading = FI_THREAD_DOMAIN;  // weft serializes per endpoint
  // Each message carries its size as immediate data (at least 4 bytes).
  hints->domain_attr->cq_data_size = 4;
  // Matching relies on messages of one comm and tag staying in order.
  hints->tx_attr->msg_order = FI_ORDER_SAS;
  hints->rx_attr->msg_order = FI_ORDER_SAS;
  if (!provider.empty()) hints->fabric_attr->prov_name = strdup(provider.c_str());
  return hints;
}

InfoPtr find_variant(const fi_info* base, uint64_t extra_caps, uint64_t extra_mr_mode,
                     uint64_t extra_order) {
  InfoPtr hints = make_hints(base->fabric_attr->prov_name, extra_caps, extra_mr_mode);
  if (!hints) return nullptr;
  hints->tx_attr->msg_order |= extra_order;
  hints->rx_attr->msg_order |= extra_order;
  hints->domain_attr->name = strdup(base->domain_attr->name);
  fi_info* found = nullptr;
  int rc = fi_getinfo(fabric_api_version(), nullptr, nullptr, 0, hints.get(), &found);
  InfoPtr all(found);
  if (rc != 0) return nullptr;
  for (fi_info* info = all.get(); info != nullptr; info = info->next) {
    if (std::strcmp(info->fabric_attr->prov_name, base->fabric_attr->prov_name) == 0 &&
        std::strcmp(info->domain_attr->name, base->domain_attr->name) == 0 &&
        (info->caps & extra_caps) == extra_caps &&
        (info->tx_attr->msg_order & extra_order) == extra_order) {
      return InfoPtr(fi_dupinfo(info));
    }
  }
  return nullptr;
}

InfoPtr find_message_variant(const fi_info* base, uint64_t extra_caps, uint64_t extra_mr_mode,
                             const std::string& fabric) {
  for (uint64_t rx_cq_data : {uint64_t{0}, uint64_t{FI_RX_CQ_DATA}}) {
    InfoPtr hints = make_hints(base->fabric_attr->prov_name, extra_caps, extra_mr_mode);
    if (!hints) return nullptr;
    hints->caps = FI_MSG | FI_SEND | FI_RECV | extra_caps;
    hints->mode |= rx_cq_data;
    // weft's matching takes messages in any order (the RDMA protocol numbers them).
    hints->tx_attr->msg_order = 0;
    hints->rx_attr->msg_order = 0;
    hints->domain_attr->name = strdup(base->domain_attr->name);
    fi_info* found = nullptr;
    int rc = fi_getinfo(fabric_api_version(), nullptr, nullptr, 0, hints.get(), &found);
    InfoPtr all(found);
    if (rc != 0) continue;
    for (fi_info* info = all.get(); info != nullptr; info = info->next) {
      if (std::strcmp(info->fabric_attr->prov_name, base->fabric_attr->prov_name) == 0 &&
          std::strcmp(info->domain_attr->name, base->domain_attr->name) == 0 &&
          (info->caps & extra_caps) == extra_caps &&
          (fabric.empty() || fabric == info->fabric_attr->name)) {
        return InfoPtr(fi_dupinfo(info));
      }
    }
  }
  return nullptr;
}

namespace {

std::string pci_path_of(const fi_info* info) {
  if (info->nic != nullptr && info->nic->bus_attr != nullptr &&
      info->nic->bus_attr->bus_type == FI_BUS_PCI) {
    const fi_pci_attr& pci = info->nic->bus_attr->attr.pci;
    return sysfs::pci_path(pci.domain_id, pci.bus_id, pci.device_id, pci.function_id);
  }
  // Software providers name a netdev as their domain: use its PCI device if
  // it has one (virtual devices such as lo or veth do not).
  return sysfs::netdev_pci_path(info->domain_attr->name);
}

// The link's speed, else the provider's, else the documented default: a
// speed of 0 makes NCCL assume 10 Gbps and treat the device as slow.
int speed_mbps_of(const fi_info* info, const Params& params) {
  int mbps = sysfs::netdev_speed_mbps(info->domain_attr->name);
  if (mbps > 0) return mbps;
  if (info->nic != nullptr && info->nic->link_attr != nullptr && info->nic->link_attr->speed > 0) {
    return static_cast<int>(std::min<uint64_t>(info->nic->link_attr->speed / 1000000, INT_MAX));
  }
  return static_cast<int>(params.default_speed_mbps);
}

uint64_t guid_of(const std::string& provider, const std::string& domain) {
  // Stable per provider and domain, so NCCL sees one port per device.
  return fnv1a_64(provider + "/" + domain);
}

DeviceProperties properties_of(const fi_info* info, const std::string& name, const Params& params) {
  DeviceProperties props;
  props.name = name;
  props.pci_path = pci_path_of(info);
  props.guid = guid_of(info->fabric_attr->prov_name, info->domain_attr->name);
  props.ptr_support = NCCL_PTR_HOST;
  props.speed_mbps = speed_mbps_of(info, params);
  props.port = 1;
  props.latency_us = 0;
  props.max_comms = 1 << 20;
  props.max_recvs = kMaxRecvs;
  uint64_t max_message = std::min<uint64_t>(info->ep_attr->max_msg_size, kMaxMessageBytes);
  if (info->domain_attr->cq_data_size < 8) {
    max_message = std::min<uint64_t>(max_message, UINT32_MAX);  // size must fit the immediate
  }
  if (params.max_p2p_bytes != 0) max_message = std::min(max_message, params.max_p2p_bytes);
  props.max_p2p_bytes = max_message;
  return props;
}

}  // namespace

std::string preferred_rdma_provider(const std::vector<std::string>& provider_names) {
  // EFA first (the cloud case), then the native HPC fabrics, verbs last.
  static const char* const order[] = {"efa", "cxi", "opx", "psm3", "psm2", "verbs", "usnic"};
  for (const char* wanted : order) {
    for (const auto& name : provider_names) {
      if (core_provider(name) == wanted) return wanted;
    }
  }
  return {};
}

bool domain_selected(const std::string& filter, const std::string& domain) {
  if (filter.empty()) return true;
  bool exclude = filter[0] == '^';
  auto names = split(exclude ? filter.substr(1) : filter, ',');
  bool listed = std::find(names.begin(), names.end(), domain) != names.end();
  return exclude ? !listed : listed;
}

ncclResult_t discover_devices(const Params& params, std::vector<DiscoveredDevice>* devices) {
  devices->clear();
  const std::string& provider = params.ofi_provider;
  InfoPtr hints = make_hints(provider, 0, 0);
  if (!hints) return ncclSystemError;
  fi_info* found = nullptr;
  int rc = fi_getinfo(fabric_api_version(), nullptr, nullptr, 0, hints.get(), &found);
  InfoPtr all(found);
  if (rc != 0 || !all) {
    if (!provider.empty()) {
      WEFT_WARN(
          "libfabric provider '%s' (WEFT_OFI_PROVIDER) offers no reliable-datagram "
          "endpoint with tagged messages: %s. Check `fi_info -p %s -t FI_EP_RDM`",
          provider.c_str(), fi_strerror(-rc), provider.c_str());
    } else {
      WEFT_WARN(
          "no libfabric provider offers a reliable-datagram endpoint with tagged messages "
          "(%s)",
          fi_strerror(-rc));
    }
    return ncclSystemError;
  }

  // Auto mode uses one provider class only: two providers over the same NIC
  // (efa and verbs, say) would show NCCL the same port twice.
  std::string auto_choice;
  if (provider.empty()) {
    std::vector<std::string> seen_names;
    for (fi_info* info = all.get(); info != nullptr; info = info->next) {
      seen_names.push_back(info->fabric_attr->prov_name);
    }
    auto_choice = preferred_rdma_provider(seen_names);
  }

  std::set<std::string> names;
  std::set<std::string> skipped_providers;
  CandidateLog candidates;
  for (fi_info* info = all.get(); info != nullptr; info = info->next) {
    std::string prov = info->fabric_attr->prov_name;
    std::string domain = info->domain_attr->name;
    if (provider.empty() && core_provider(prov) != auto_choice) {
      if (!is_rdma_provider(prov)) skipped_providers.insert(prov);
      candidates.reject(prov, domain,
                        is_rdma_provider(prov)
                            ? "RDMA-class, but auto prefers " + auto_choice +
                                  " (efa, cxi, opx, psm3, psm2, verbs, usnic in that order); "
                                  "WEFT_OFI_PROVIDER=" +
                                  core_provider(prov) + " uses it"
                            : "a software provider, which auto never takes; "
                              "WEFT_OFI_PROVIDER=" +
                                  core_provider(prov) + " uses it");
      continue;
    }
    if (!domain_selected(params.ofi_domain, domain)) {
      candidates.reject(prov, domain, "domain excluded by WEFT_OFI_DOMAIN=" + params.ofi_domain);
      continue;
    }
    std::string name = domain;
    bool seen = false;
    for (const auto& device : *devices) {
      // Later entries for a domain are less preferred variants, also of the
      // same core provider through a utility layer (libfabric 2.x lists
      // "tcp" and "tcp;ofi_rxm" for one NIC): NCCL must see a NIC once.
      if (core_provider(device.info->fabric_attr->prov_name) == core_provider(prov) &&
          device.info->domain_attr->name == domain) {
        seen = true;
      }
    }
    if (seen) {
      candidates.reject(
          prov, domain,
          "another variant of " + core_provider(prov) + " on this domain is listed first and used");
      continue;
    }
    candidates.use(prov, domain,
                   provider.empty() ? "auto: the preferred RDMA-class provider here"
                                    : "WEFT_OFI_PROVIDER=" + provider);
    if (names.count(name)) name = domain + ":" + core_provider(prov);
    names.insert(name);
    DiscoveredDevice device;
    device.info.reset(fi_dupinfo(info));
    if (!device.info) return ncclSystemError;
    device.properties = properties_of(info, name, params);
    devices->push_back(std::move(device));
  }

  candidates.log();
  if (devices->empty()) {
    std::string seen;
    for (const auto& name : skipped_providers) seen += (seen.empty() ? "" : ", ") + name;
    if (provider.empty()) {
      WEFT_WARN(
          "no RDMA-capable libfabric provider found (software providers seen: %s). NCCL "
          "will use its built-in transports. To use weft over a software provider for "
          "development, set WEFT_OFI_PROVIDER=tcp (or shm, udp)",
          seen.empty() ? "none" : seen.c_str());
    } else {
      WEFT_WARN("libfabric provider '%s' has no domain matching WEFT_OFI_DOMAIN='%s'",
                provider.c_str(), params.ofi_domain.c_str());
    }
    return ncclSystemError;
  }
  return ncclSuccess;
}

}  // namespace weft::ofi
