// Which data protocol a libfabric device uses (WEFT_OFI_PROTOCOL), decided
// from what the provider offers on that domain rather than assumed.
#pragma once

#include <string>

#include "ofi/discovery/provider_discovery.h"
#include "ofi/wire/connection_messages.h"
#include "weft/params.h"

namespace weft::ofi {

struct ProtocolChoice {
  Protocol protocol = Protocol::Tagged;
  std::string reason;
  // RDMA protocol: weft matches its control messages (WEFT_OFI_TAG_MATCHING).
  bool weft_matching = false;
};

// For rdma, swaps device->info for the provider's variant with RMA writes
// (keeping FI_HMEM if it was there). Fails only when rdma was asked for
// and the provider cannot do it.
ncclResult_t choose_protocol(DiscoveredDevice* device, const std::string& setting,
                             const std::string& matching, ProtocolChoice* choice);

// The decision alone, for tests: `rdma_capable` is whether the provider
// offers FI_RMA writes with at least 4 bytes of remote CQ data.
ProtocolChoice decide_protocol(const std::string& setting, const std::string& provider,
                               bool rdma_capable);

}  // namespace weft::ofi
