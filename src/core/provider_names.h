// libfabric provider names, as weft classifies them: the core provider of
// a layered name ("tcp;ofi_rxm" is tcp's), and which ones move data with
// RDMA hardware. Shared by the libfabric transport and weft-info's node
// check, which reads the provider from the plugin's log.
#pragma once

#include <string>

namespace weft {

// "tcp" for "tcp;ofi_rxm": the provider under any utility layers.
std::string core_provider(const std::string& provider_name);

// Providers that move data with RDMA hardware; auto mode uses only these.
bool is_rdma_provider(const std::string& provider_name);

// libfabric's EFA provider ("efa", or layered as "efa;ofi_rxd"); its two
// fabrics (efa, efa-direct) share the provider name.
bool is_efa_provider(const std::string& provider_name);

}  // namespace weft
