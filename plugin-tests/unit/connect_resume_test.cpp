// core/connect_resume.h: the steps of a non-blocking connect() every
// transport takes, with a fake comm.
#include "core/connect_resume.h"

#include <array>
#include <catch2/catch.hpp>
#include <cstring>
#include <vector>

namespace {

struct FakeSendComm final : weft::SendComm {
  explicit FakeSendComm(int* closed_count) : closed(closed_count) {}
  ncclResult_t reg_mr(void*, size_t, int, void**) override { return ncclSuccess; }
  ncclResult_t reg_mr_dmabuf(void*, size_t, int, uint64_t, int, void**) override {
    return ncclSuccess;
  }
  ncclResult_t dereg_mr(void*) override { return ncclSuccess; }
  ncclResult_t isend(void*, size_t, int, void*, weft::Request**) override { return ncclSuccess; }
  void close() override {
    ++*closed;
    delete this;
  }
  int steps = 0;
  int* closed;
};

struct Connector {
  ncclResult_t call(void* handle, weft::SendComm** out) {
    auto check = [&](const weft::ListenHandle& decoded) {
      return decoded.fingerprint == 0x1234 ? ncclSuccess : ncclInvalidUsage;
    };
    auto build = [&](const weft::ListenHandle&, std::unique_ptr<FakeSendComm>* comm) {
      ++builds;
      *comm = std::make_unique<FakeSendComm>(&closed);
      return ncclSuccess;
    };
    auto step = [&](FakeSendComm& comm, bool* connected) {
      ++comm.steps;
      if (comm.steps == fail_at_step) return ncclRemoteError;
      *connected = comm.steps >= steps_to_connect;
      return ncclSuccess;
    };
    return weft::resume_connect(pending, weft::TransportId::Verbs, "dev0", handle, check, build,
                                step, out);
  }

  weft::PendingConnects<FakeSendComm> pending;
  int builds = 0;
  int closed = 0;
  int steps_to_connect = 3;
  int fail_at_step = -1;
};

void make_handle(uint32_t fingerprint, uint8_t out[weft::kHandleSize]) {
  weft::ListenHandle handle;
  handle.transport = weft::TransportId::Verbs;
  handle.fingerprint = fingerprint;
  handle.listen_id = 5;
  handle.secret = 0x5ec2e7;
  handle.payload_size = 1;
  weft::encode_handle(handle, out);
}

uint64_t cookie_of(const uint8_t* handle) {
  weft::ListenHandle decoded;
  std::string error;
  REQUIRE(
      weft::decode_handle(handle, weft::kHandleSize, weft::TransportId::Verbs, &decoded, &error));
  return decoded.connect_cookie;
}

}  // namespace

TEST_CASE("connect parks the comm under a cookie until it is connected", "[unit][connect]") {
  Connector connector;
  uint8_t handle[weft::kHandleSize];
  make_handle(0x1234, handle);
  weft::SendComm* comm = nullptr;
  for (int call = 1; call < 3; ++call) {
    REQUIRE(connector.call(handle, &comm) == ncclSuccess);
    CHECK(comm == nullptr);
    CHECK(cookie_of(handle) != 0);
  }
  REQUIRE(connector.call(handle, &comm) == ncclSuccess);
  REQUIRE(comm != nullptr);
  CHECK(static_cast<FakeSendComm*>(comm)->steps == 3);
  CHECK(connector.builds == 1);
  CHECK(cookie_of(handle) == 0);
  comm->close();
  CHECK(connector.closed == 1);
}

TEST_CASE("a failed connect step closes the comm and clears the cookie", "[unit][connect]") {
  Connector connector;
  connector.fail_at_step = 2;
  uint8_t handle[weft::kHandleSize];
  make_handle(0x1234, handle);
  weft::SendComm* comm = nullptr;
  REQUIRE(connector.call(handle, &comm) == ncclSuccess);
  CHECK(cookie_of(handle) != 0);
  CHECK(connector.call(handle, &comm) == ncclRemoteError);
  CHECK(comm == nullptr);
  CHECK(connector.closed == 1);
  CHECK(cookie_of(handle) == 0);
  // The same handle starts afresh.
  connector.fail_at_step = -1;
  connector.steps_to_connect = 1;
  REQUIRE(connector.call(handle, &comm) == ncclSuccess);
  REQUIRE(comm != nullptr);
  CHECK(connector.builds == 2);
  comm->close();
}

TEST_CASE("connect refuses foreign and mismatched handles before building", "[unit][connect]") {
  Connector connector;
  uint8_t handle[weft::kHandleSize];
  make_handle(0x9999, handle);
  weft::SendComm* comm = nullptr;
  CHECK(connector.call(handle, &comm) == ncclInvalidUsage);
  std::memset(handle, 0xab, sizeof(handle));
  CHECK(connector.call(handle, &comm) == ncclInvalidArgument);
  CHECK(comm == nullptr);
  CHECK(connector.builds == 0);
}

TEST_CASE("at most kMaxConnectsInFlight connects are set up at once", "[unit][connect]") {
  Connector connector;
  connector.steps_to_connect = 2;
  std::vector<std::array<uint8_t, weft::kHandleSize>> handles(weft::kMaxConnectsInFlight + 1);
  weft::SendComm* comm = nullptr;
  for (auto& handle : handles) {
    make_handle(0x1234, handle.data());
    REQUIRE(connector.call(handle.data(), &comm) == ncclSuccess);
    CHECK(comm == nullptr);
  }
  // The last one was not even built: its handle carries no cookie.
  CHECK(connector.builds == static_cast<int>(weft::kMaxConnectsInFlight));
  CHECK(cookie_of(handles.back().data()) == 0);
  REQUIRE(connector.call(handles.back().data(), &comm) == ncclSuccess);
  CHECK(connector.builds == static_cast<int>(weft::kMaxConnectsInFlight));

  // One finishes: the waiting one is built on its next call, and connects.
  REQUIRE(connector.call(handles.front().data(), &comm) == ncclSuccess);
  REQUIRE(comm != nullptr);
  comm->close();
  REQUIRE(connector.call(handles.back().data(), &comm) == ncclSuccess);
  CHECK(comm == nullptr);
  CHECK(connector.builds == static_cast<int>(weft::kMaxConnectsInFlight) + 1);
  REQUIRE(connector.call(handles.back().data(), &comm) == ncclSuccess);
  REQUIRE(comm != nullptr);
  comm->close();

  for (size_t i = 1; i + 1 < handles.size(); ++i) {
    REQUIRE(connector.call(handles[i].data(), &comm) == ncclSuccess);
    REQUIRE(comm != nullptr);
    comm->close();
  }
  CHECK(connector.closed == static_cast<int>(weft::kMaxConnectsInFlight) + 1);
}
