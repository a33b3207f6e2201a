// Values from the environment: every WEFT_* parameter parsed from fuzzed
// text (a malformed one fails with a message naming it), and the
// specification languages inside some of them (interfaces in
// NCCL_SOCKET_IFNAME syntax, HCA lists, GID subnets).
#include <arpa/inet.h>

#include <string>
#include <vector>

#include "core/socket_address.h"
#include "fuzz_util.h"
#include "verbs/gid_select.h"
#include "verbs/hca_filter.h"
#include "weft/param_spec.h"
#include "weft/params.h"

using namespace weft;

namespace {

std::vector<InterfaceAddress> sample_interfaces() {
  std::vector<InterfaceAddress> interfaces;
  const char* names[] = {"lo", "eth0", "ib0", "docker0", "enp1s0f1"};
  for (int i = 0; i < 5; ++i) {
    InterfaceAddress entry;
    entry.name = names[i];
    in_addr address{};
    inet_pton(AF_INET, i == 0 ? "127.0.0.1" : "10.0.0.1", &address);
    address.s_addr += static_cast<in_addr_t>(i) << 24;
    entry.address = SocketAddress::from_ipv4(address, 0);
    entry.loopback = i == 0;
    interfaces.push_back(entry);
  }
  return interfaces;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const uint8_t selector = data[0];
  const std::string text(reinterpret_cast<const char*>(data + 1), size - 1);
  std::string error;
  switch (selector % 4) {
    case 0: {
      // One parameter (chosen by the selector) set to the text.
      const auto specs = param_specs();
      const std::string name = specs[(selector / 4) % specs.size()].env_name;
      const std::string value = text.substr(0, text.find('\0'));
      Params params;
      EnvLookup env = [&](const char* variable) -> const char* {
        return name == variable ? value.c_str() : nullptr;
      };
      if (!load_params(params, error, env)) FUZZ_CHECK(error.find(name) != std::string::npos);
      break;
    }
    case 1: {
      InterfaceAddress chosen;
      static const std::vector<InterfaceAddress> interfaces = sample_interfaces();
      if (pick_from(interfaces, text, AF_UNSPEC, &chosen, &error)) {
        FUZZ_CHECK(!chosen.name.empty());
      } else {
        FUZZ_CHECK(!error.empty());
      }
      break;
    }
    case 2: {
      verbs::HcaFilter filter;
      if (!verbs::HcaFilter::parse(text, &filter, &error)) FUZZ_CHECK(!error.empty());
      break;
    }
    default: {
      verbs::Subnet subnet;
      if (!verbs::parse_subnet(text, &subnet, &error)) FUZZ_CHECK(!error.empty());
      break;
    }
  }
  return 0;
}
