// Finds libfabric RDM providers and turns each usable domain into a weft
// device, honouring WEFT_OFI_PROVIDER and WEFT_OFI_DOMAIN.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/provider_names.h"
#include "ofi/fabric/fabric_ptr.h"
#include "weft/params.h"
#include "weft/transport.h"

namespace weft::ofi {

struct DiscoveredDevice {
  InfoPtr info;  // one fi_info, the provider's preferred entry for this domain
  DeviceProperties properties;
};

// What weft asks every provider for (RDM, tagged, send-after-send order,
// 4 bytes of CQ data, every mr_mode it handles), plus `extra_caps`.
InfoPtr make_hints(const std::string& provider, uint64_t extra_caps, uint64_t extra_mr_mode);

// The same provider and domain as `base`, asked again with extra caps and
// mr_mode bits; nullptr when the provider does not offer them there.
// `extra_order`: message order bits asked for on top of send-after-send.
InfoPtr find_variant(const fi_info* base, uint64_t extra_caps, uint64_t extra_mr_mode,
                     uint64_t extra_order = 0);
// The same provider and domain offering plain messages (FI_MSG) and
// `extra_caps`, asking for no FI_TAGGED and no message order; when
// `fabric` is not empty, only that fabric (efa's "efa-direct": the efa
// fabric answers such hints too). Asks first without FI_RX_CQ_DATA (remote
// writes consume no receive), then with it. Null when none.
InfoPtr find_message_variant(const fi_info* base, uint64_t extra_caps, uint64_t extra_mr_mode,
                             const std::string& fabric);

// On failure logs what was found and which variable to set.
ncclResult_t discover_devices(const Params& params, std::vector<DiscoveredDevice>* devices);

// Auto mode's choice among the providers fi_getinfo returned: the core
// provider name ("efa", "verbs", ...), or empty when none is RDMA-class.
std::string preferred_rdma_provider(const std::vector<std::string>& provider_names);

// WEFT_OFI_DOMAIN semantics: empty keeps all; "a,b" keeps those; "^a,b"
// keeps all but those.
bool domain_selected(const std::string& filter, const std::string& domain);

}  // namespace weft::ofi
