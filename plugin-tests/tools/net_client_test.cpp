// NetClient against the built plugin: symbol lookup and the argument checks
// it does itself before calling into a version (no fabric needed).
#include "weft_client/net_client.h"

#include <catch2/catch.hpp>
#include <climits>

using weft::NetClient;

TEST_CASE("exported_abi_versions lists v12..v6 for weft") {
  std::string error;
  auto versions = weft::exported_abi_versions(WEFT_PLUGIN_PATH, error);
  CHECK(error.empty());
  CHECK(versions == std::vector<int>{12, 11, 10, 9, 8, 7, 6});
}

TEST_CASE("load picks the newest version or exactly the one asked for") {
  std::string error;
  auto newest = NetClient::load(WEFT_PLUGIN_PATH, 0, error);
  REQUIRE(newest);
  CHECK(newest->abi_version() == 12);
  CHECK(newest->v12() != nullptr);
  CHECK(newest->v6() == nullptr);
  CHECK(std::string(newest->plugin_name()) == "weft");
  for (int v = 6; v <= 12; ++v) {
    auto c = NetClient::load(WEFT_PLUGIN_PATH, v, error);
    REQUIRE(c);
    CHECK(c->abi_version() == v);
  }
}

TEST_CASE("load failures explain themselves") {
  std::string error;
  CHECK_FALSE(NetClient::load("/nonexistent/libnccl-net-x.so", 0, error));
  CHECK(error.find("cannot load") != std::string::npos);
  CHECK(error.find("/nonexistent/libnccl-net-x.so") != std::string::npos);

  error.clear();
  CHECK_FALSE(NetClient::load("libm.so.6", 0, error));
  CHECK(error.find("ncclNetPlugin_v") != std::string::npos);

  error.clear();
  CHECK_FALSE(NetClient::load(WEFT_PLUGIN_PATH, 13, error));
  CHECK(error.find("unsupported") != std::string::npos);
}

TEST_CASE("int-sized ABIs reject sizes above INT_MAX without calling the plugin") {
  std::string error;
  const size_t big = size_t{INT_MAX} + 1;
  for (int v : {6, 7, 8}) {
    auto c = NetClient::load(WEFT_PLUGIN_PATH, v, error);
    REQUIRE(c);
    void* req = nullptr;
    // Null comms are safe: the client must refuse before reaching the plugin.
    CHECK(c->isend(nullptr, nullptr, big, 0, nullptr, &req) == ncclInvalidArgument);
    size_t sizes[1] = {big};
    int tags[1] = {0};
    void* data[1] = {nullptr};
    void* mh[1] = {nullptr};
    CHECK(c->irecv(nullptr, 1, data, sizes, tags, mh, &req) == ncclInvalidArgument);
    CHECK(c->irecv(nullptr, 65, data, sizes, tags, mh, &req) == ncclInvalidArgument);
    if (v <= 7) {
      void* mhandle = nullptr;
      CHECK(c->reg_mr(nullptr, nullptr, big, NCCL_PTR_HOST, &mhandle) == ncclInvalidArgument);
    }
  }
}
