#include <catch2/catch.hpp>

#include "ofi/provider_discovery.h"
#include "ofi/provider_quirks.h"

using weft::ofi::domain_selected;
using weft::ofi::is_rdma_provider;
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
