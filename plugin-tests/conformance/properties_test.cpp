// Device properties as NCCL reads them, in every exported ABI version.
#include <catch2/catch.hpp>
#include <climits>
#include <cstdlib>
#include <set>

#include "net_ops.h"
#include "raw_calls.h"
#include "two_rank.h"

using namespace weft;
using namespace weft::ft;

namespace {
// The props struct type a getProperties pointer takes.
template <class R, class P>
P* props_arg(R (*)(int, P*));
}  // namespace

TEST_CASE("properties: names, maxRecvs, maxComms, maxP2pBytes, pciPath, HOST plugin", "[props]") {
  const int v = GENERATE(filter(abi_version_selected, range(6, 13)));
  INFO("ABI v" << v);
  auto r = run_one([&](Rank&) {
    auto c = open_plugin(v);
    FT_REQUIRE(c->plugin_name() != nullptr && *c->plugin_name() != '\0',
               "the table's name is NULL or empty (NCCL_NET matches on it)");
    int nd = 0;
    FT_OK(c->devices(&nd));
    std::set<std::string> names;
    for (int d = 0; d < nd; ++d) {
      NetDeviceInfo info;
      FT_OK(c->properties(d, &info));
      const std::string dn = "device " + std::to_string(d) + " '" + info.name + "'";
      FT_REQUIRE(!info.name.empty(), dn << ": empty name");
      // NCCL keys its topology on the name.
      FT_REQUIRE(names.insert(info.name).second, dn << ": duplicate device name");
      FT_REQUIRE(info.max_recvs >= 1, dn << ": maxRecvs " << info.max_recvs);
      FT_REQUIRE(info.max_comms > 0, dn << ": maxComms " << info.max_comms);
      FT_REQUIRE((info.ptr_support & NCCL_PTR_HOST) != 0,
                 dn << ": ptrSupport " << info.ptr_support);
      if (!info.pci_path.empty()) {
        // NCCL reads the PCI tree from this path: it must exist under /sys.
        char real[PATH_MAX];
        FT_REQUIRE(::realpath(info.pci_path.c_str(), real) != nullptr,
                   dn << ": pciPath '" << info.pci_path << "' does not exist");
        FT_REQUIRE(std::string(real).rfind("/sys/", 0) == 0,
                   dn << ": pciPath '" << info.pci_path << "' is not a sysfs path (resolves to "
                      << real << ")");
      }
      // Version-specific fields, read from the raw table.
      with_table(*c, [&](auto* t) -> int {
        using T = std::remove_cv_t<std::remove_pointer_t<decltype(t)>>;
        using Props = std::remove_pointer_t<decltype(props_arg(t->getProperties))>;
        Props p{};
        FT_OK(t->getProperties(d, &p));
        FT_REQUIRE(p.name != nullptr && info.name == p.name, dn << ": raw name differs");
        if constexpr (!std::is_same_v<T, ncclNet_v6_t>) {
          if (p.netDeviceType == NCCL_NET_DEVICE_HOST) {
            FT_REQUIRE(t->getDeviceMr == nullptr, dn << ": HOST device but getDeviceMr is set");
            FT_REQUIRE(t->irecvConsumed == nullptr, dn << ": HOST device but irecvConsumed is set");
          }
        }
        if constexpr (std::is_same_v<T, ncclNet_v11_t> || std::is_same_v<T, ncclNet_v12_t>) {
          FT_REQUIRE(t->finalize != nullptr,
                     "finalize must not be NULL (NCCL calls it unconditionally)");
        }
        return 0;
      });
      if (v >= 9) {
        FT_REQUIRE(info.max_p2p_bytes > 0 && info.max_p2p_bytes <= NCCL_MAX_NET_SIZE_BYTES,
                   dn << ": maxP2pBytes " << info.max_p2p_bytes << ", must be in (0, 1 TiB]");
      }
    }
  });
  REQUIRE_RANKS(r);
}
