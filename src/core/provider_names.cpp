#include "core/provider_names.h"

#include <set>

namespace weft {

std::string core_provider(const std::string& provider_name) {
  return provider_name.substr(0, provider_name.find(';'));
}

bool is_rdma_provider(const std::string& provider_name) {
  static const std::set<std::string> rdma = {"efa", "verbs", "cxi", "psm3", "psm2", "opx", "usnic"};
  return rdma.count(core_provider(provider_name)) > 0;
}

bool is_efa_provider(const std::string& provider_name) {
  return core_provider(provider_name) == "efa";
}

}  // namespace weft
