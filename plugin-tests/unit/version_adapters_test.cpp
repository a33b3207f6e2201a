#include "abi/net/version_adapters.h"

#include <catch2/catch.hpp>
#include <cstring>

#include "nccl/net.h"

using weft::DeviceProperties;
using weft::abi::fill_properties;

namespace {

DeviceProperties sample() {
  DeviceProperties props;
  props.name = "lo";
  props.pci_path = "";
  props.guid = 99;
  props.speed_mbps = 100000;
  props.port = 1;
  props.latency_us = 1.5f;
  props.max_comms = 1000;
  props.max_recvs = 8;
  props.max_p2p_bytes = 1ull << 40;
  props.reg_is_global = true;
  return props;
}

}  // namespace

TEST_CASE("v6 properties carry the common fields", "[unit][abi]") {
  ncclNetProperties_v6_t props;
  std::memset(&props, 0xff, sizeof(props));
  fill_properties(0, sample(), &props);
  CHECK(std::string(props.name) == "lo");
  CHECK(props.pciPath == nullptr);
  CHECK(props.guid == 99);
  CHECK(props.ptrSupport == NCCL_PTR_HOST);
  CHECK(props.speed == 100000);
  CHECK(props.maxRecvs == 8);
  CHECK(props.latency == 1.5f);
}

TEST_CASE("v8 adds regIsGlobal, v9 adds vProps and maxP2pBytes", "[unit][abi]") {
  ncclNetProperties_v8_t v8;
  fill_properties(0, sample(), &v8);
  CHECK(v8.regIsGlobal == 1);
  CHECK(v8.netDeviceType == NCCL_NET_DEVICE_HOST);

  ncclNetProperties_v9_t v9;
  fill_properties(3, sample(), &v9);
  CHECK(v9.vProps.ndevs == 1);
  CHECK(v9.vProps.devs[0] == 3);
  CHECK(v9.maxP2pBytes == (1ull << 40));
  CHECK(v9.forceFlush == 0);
}

TEST_CASE("v11 and v12 fill the newest fields", "[unit][abi]") {
  ncclNetProperties_v11_t v11;
  fill_properties(0, sample(), &v11);
  CHECK(v11.maxMultiRequestSize == 1);
  CHECK(v11.maxCollBytes == (1ull << 40));

  ncclNetProperties_v12_t v12;
  fill_properties(2, sample(), &v12);
  CHECK(v12.railId == -1);
  CHECK(v12.vProps.devs[0] == 2);
  CHECK(std::string(v12.name) == "lo");
}

TEST_CASE("property strings are interned and stable", "[unit][abi]") {
  ncclNetProperties_v6_t a;
  ncclNetProperties_v6_t b;
  fill_properties(0, sample(), &a);
  fill_properties(0, sample(), &b);
  CHECK(a.name == b.name);
}

TEST_CASE("int-size adapters reject negative sizes and oversized groups", "[unit][abi]") {
  void* request = reinterpret_cast<void*>(0x1);
  CHECK(weft::abi::isend_int_size(nullptr, nullptr, -1, 0, nullptr, &request) ==
        ncclInvalidArgument);
  CHECK(request == nullptr);
  request = reinterpret_cast<void*>(0x1);
  int sizes[9] = {};
  int tags[9] = {};
  void* data[9] = {};
  CHECK(weft::abi::irecv_int_sizes(nullptr, 9, data, sizes, tags, nullptr, &request) ==
        ncclInvalidArgument);
  CHECK(request == nullptr);
  int negative[1] = {-5};
  CHECK(weft::abi::irecv_int_sizes(nullptr, 1, data, negative, tags, nullptr, &request) ==
        ncclInvalidArgument);
}
