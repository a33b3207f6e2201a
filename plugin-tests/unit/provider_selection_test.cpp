#include <catch2/catch.hpp>
#include <cstdlib>

#include "ofi/discovery/provider_discovery.h"
#include "ofi/fabric/provider_quirks.h"

using weft::is_rdma_provider;
using weft::ofi::domain_selected;
using weft::ofi::preferred_rdma_provider;

TEST_CASE("auto mode takes only RDMA-class providers", "[unit][ofi]") {
  CHECK(is_rdma_provider("efa"));
  CHECK(is_rdma_provider("verbs;ofi_rxm"));
  CHECK(is_rdma_provider("cxi"));
  CHECK(is_rdma_provider("psm3"));
  CHECK_FALSE(is_rdma_provider("tcp;ofi_rxm"));
  CHECK_FALSE(is_rdma_provider("shm"));
  CHECK_FALSE(is_rdma_provider("udp;ofi_rxd"));
  CHECK_FALSE(is_rdma_provider("sockets"));
}

TEST_CASE("WEFT_OFI_DOMAIN includes or excludes domains", "[unit][ofi]") {
  CHECK(domain_selected("", "eth0"));
  CHECK(domain_selected("lo", "lo"));
  CHECK_FALSE(domain_selected("lo", "eth0"));
  CHECK(domain_selected("eth0,lo", "lo"));
  CHECK_FALSE(domain_selected("^lo", "lo"));
  CHECK(domain_selected("^lo", "eth0"));
  CHECK_FALSE(domain_selected("lo0", "lo"));
}

TEST_CASE("auto mode prefers EFA and uses one provider class", "[unit][ofi]") {
  CHECK(preferred_rdma_provider({"tcp;ofi_rxm", "verbs;ofi_rxm", "efa", "shm"}) == "efa");
  CHECK(preferred_rdma_provider({"verbs;ofi_rxm", "cxi"}) == "cxi");
  CHECK(preferred_rdma_provider({"tcp;ofi_rxm", "verbs;ofi_rxm"}) == "verbs");
  CHECK(preferred_rdma_provider({"tcp;ofi_rxm", "shm", "udp;ofi_rxd"}).empty());
  CHECK(preferred_rdma_provider({}).empty());
}

TEST_CASE("sends over tcp sockets complete before delivery", "[unit][ofi]") {
  using weft::ofi::completes_before_delivery;
  CHECK(completes_before_delivery("tcp"));          // 2.x's own RDM endpoint
  CHECK(completes_before_delivery("tcp;ofi_rxm"));  // 1.x: rxm over tcp
  CHECK_FALSE(completes_before_delivery("verbs;ofi_rxm"));
  CHECK_FALSE(completes_before_delivery("shm"));
  CHECK_FALSE(completes_before_delivery("efa"));
  CHECK_FALSE(completes_before_delivery("tcpx"));
}

TEST_CASE("a full receive queue names the variable that sizes it", "[unit][ofi]") {
  using weft::ofi::receive_queue_hint;
  ::unsetenv("FI_SHM_RX_SIZE");
  ::unsetenv("FI_OFI_RXM_RX_SIZE");
  CHECK(receive_queue_hint("shm") == "FI_SHM_RX_SIZE (not set: 1024)");
  // rxm owns the queue it posts on, not the core provider under it.
  CHECK(receive_queue_hint("tcp;ofi_rxm") == "FI_OFI_RXM_RX_SIZE (not set: 2048)");
  CHECK(receive_queue_hint("verbs;ofi_rxm") == "FI_OFI_RXM_RX_SIZE (not set: 2048)");
  CHECK(receive_queue_hint("efa") == "FI_EFA_RX_SIZE (not set)");
  CHECK(receive_queue_hint("sockets").empty());
  ::setenv("FI_SHM_RX_SIZE", "16384", 1);
  CHECK(receive_queue_hint("shm") == "FI_SHM_RX_SIZE (set to 16384)");
  ::unsetenv("FI_SHM_RX_SIZE");
}

TEST_CASE("the full-queue note carries the hint, or nothing", "[unit][ofi]") {
  ::unsetenv("FI_SHM_RX_SIZE");
  CHECK(weft::ofi::receive_queue_full_note("shm") ==
        " (the provider's receive queue is full: each receive posted to it takes an entry; its "
        "size: FI_SHM_RX_SIZE (not set: 1024))");
  CHECK(weft::ofi::receive_queue_full_note("sockets").empty());
}

TEST_CASE("libfabric before 1.19's shm is warned about under the rdma protocol", "[unit][ofi]") {
  using weft::ofi::unexpected_message_limit_warning;
  const std::string warning = unexpected_message_limit_warning("shm", FI_VERSION(1, 17));
  CHECK(warning.find("libfabric 1.17's shm") == 0);
  CHECK(warning.find("ofiwg/libfabric#9143") != std::string::npos);
  CHECK(unexpected_message_limit_warning("shm", FI_VERSION(1, 18)) != "");
  CHECK(unexpected_message_limit_warning("shm", FI_VERSION(1, 19)) == "");
  CHECK(unexpected_message_limit_warning("shm", FI_VERSION(2, 6)) == "");
  CHECK(unexpected_message_limit_warning("tcp", FI_VERSION(1, 17)) == "");
  CHECK(unexpected_message_limit_warning("tcp;ofi_rxm", FI_VERSION(1, 17)) == "");
}
