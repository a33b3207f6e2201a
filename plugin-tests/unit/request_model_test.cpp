// verbs/polled_request.h's PolledRequest and core/connection_fault.h: the rules
// both transports' requests and connections follow.
#include <catch2/catch.hpp>

#include "core/connection_fault.h"
#include "verbs/polled_request.h"

namespace {

struct FakeOwner final : weft::RequestOwner {
  ncclResult_t progress() override {
    ++progress_calls;
    if (complete_on_progress != nullptr) complete_on_progress->pending = 0;
    return progress_result;
  }
  void recycle(weft::Request* request) override { recycled.push_back(request); }

  int progress_calls = 0;
  ncclResult_t progress_result = ncclSuccess;
  weft::verbs::PolledRequest<8>* complete_on_progress = nullptr;
  std::vector<weft::Request*> recycled;
};

}  // namespace

TEST_CASE("a polled request drives its owner until done, then reports sizes once",
          "[unit][request]") {
  FakeOwner owner;
  weft::verbs::PolledRequest<8> request;
  request.start(&owner, 2);
  request.pending = 1;
  request.sizes[0] = 100;
  request.sizes[1] = 7;
  int done = -1;
  int sizes[2] = {-1, -1};
  REQUIRE(request.test(&done, sizes) == ncclSuccess);
  CHECK(done == 0);
  CHECK(owner.progress_calls == 1);
  CHECK(owner.recycled.empty());

  owner.complete_on_progress = &request;
  REQUIRE(request.test(&done, sizes) == ncclSuccess);
  CHECK(done == 1);
  CHECK(sizes[0] == 100);
  CHECK(sizes[1] == 7);
  REQUIRE(owner.recycled.size() == 1);
  CHECK(owner.recycled[0] == &request);

  // Tested again after it was handed back: refused, not recycled twice.
  CHECK(request.test(&done, sizes) == ncclInvalidArgument);
  CHECK(done == 0);
  CHECK(owner.recycled.size() == 1);
}

TEST_CASE("a polled request ends with its own failure or the connection's", "[unit][request]") {
  FakeOwner owner;
  weft::verbs::PolledRequest<8> own_failure;
  own_failure.start(&owner, 1);
  own_failure.result = ncclInvalidUsage;  // e.g. truncated
  int done = -1;
  CHECK(own_failure.test(&done, nullptr) == ncclInvalidUsage);
  CHECK(done == 0);
  CHECK(owner.progress_calls == 0);
  CHECK(owner.recycled.size() == 1);

  weft::verbs::PolledRequest<8> pending;
  pending.start(&owner, 1);
  pending.pending = 1;
  owner.progress_result = ncclRemoteError;  // the connection failed
  CHECK(pending.test(&done, nullptr) == ncclRemoteError);
  CHECK(done == 0);
  CHECK(owner.recycled.size() == 2);
}

TEST_CASE("a connection's first failure wins", "[unit][request]") {
  weft::ConnectionFault fault;
  CHECK_FALSE(fault.raised());
  CHECK(fault.result() == ncclSuccess);
  CHECK(fault.raise(ncclRemoteError, "dev0", "peer", "first") == ncclRemoteError);
  CHECK(fault.raise(ncclSystemError, "dev0", "peer", "second") == ncclRemoteError);
  CHECK(fault.raised());
  CHECK(fault.result() == ncclRemoteError);
}
