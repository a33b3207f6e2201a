#include "ofi/endpoint/control_send_copies.h"

#include <catch2/catch.hpp>
#include <cstring>
#include <memory>
#include <set>
#include <thread>
#include <vector>

#include "ofi/discovery/provider_discovery.h"
#include "ofi/endpoint/endpoint.h"
#include "ofi/endpoint/slot_claims.h"
#include "ofi/wire/rdma_wire.h"

using namespace weft;
using namespace weft::ofi;

TEST_CASE("slot claims hand out the lowest free index below the limit", "[unit][slot_claims]") {
  SlotClaims<128> claims;
  for (int i = 0; i < 70; ++i) REQUIRE(claims.claim(70) == i);
  CHECK(claims.claim(70) == -1);  // the limit, not the capacity, bounds it
  CHECK(claims.count() == 70);
  claims.release(3);
  claims.release(65);
  CHECK_FALSE(claims.claimed(3));
  CHECK(claims.claim(70) == 3);
  CHECK(claims.claim(70) == 65);
  CHECK(claims.claim(128) == 70);
  CHECK(claims.claim(0) == -1);
}

TEST_CASE("slot claims never give one index to two threads", "[unit][slot_claims]") {
  SlotClaims<256> claims;
  std::vector<std::atomic<int>> owner(256);
  std::atomic<int> clashes{0};
  std::vector<std::thread> threads;
  for (int t = 1; t <= 4; ++t) {
    threads.emplace_back([&, t] {
      for (int n = 0; n < 50000; ++n) {
        const int index = claims.claim(200);
        if (index < 0) continue;
        if (owner[index].exchange(t) != 0) clashes.fetch_add(1);
        owner[index].store(0);
        claims.release(index);
      }
    });
  }
  for (auto& thread : threads) thread.join();
  CHECK(clashes.load() == 0);
  CHECK(claims.count() == 0);
}

namespace {

// A shm endpoint of this process (shm needs no network).
std::shared_ptr<Endpoint> open_shm_endpoint() {
  InfoPtr hints = make_hints("shm", 0, 0);
  fi_info* found = nullptr;
  REQUIRE(fi_getinfo(fabric_api_version(), nullptr, nullptr, 0, hints.get(), &found) == 0);
  InfoPtr all(found);
  std::shared_ptr<Endpoint> endpoint;
  REQUIRE(Endpoint::open(all.get(), "shm-test", EndpointOptions{}, &endpoint) == ncclSuccess);
  return endpoint;
}

}  // namespace

TEST_CASE("control send copies are registered a chunk at a time, up to the limit",
          "[unit][control_copies]") {
  auto endpoint = open_shm_endpoint();
  const size_t regions_before = endpoint->domain().registrations_held();
  // 100 rounds up to two chunks.
  auto copies = std::make_unique<ControlSendCopies>(*endpoint, kCtsMaxSize, 100);
  CHECK(copies->limit() == 2 * ControlSendCopies::kChunk);
  CHECK(copies->copy_size() % 64 == 0);
  CHECK(copies->copy_size() >= kCtsMaxSize);
  CHECK(copies->chunks() == 0);  // nothing until a copy is wanted
  CHECK(endpoint->domain().registrations_held() == regions_before);

  std::vector<ControlSendCopies::Copy> taken;
  std::set<uint8_t*> starts;
  for (int i = 0; i < copies->limit(); ++i) {
    ControlSendCopies::Copy copy;
    REQUIRE(copies->take(&copy) == ControlSendCopies::Take::kTaken);
    CHECK(copy.index == i);
    CHECK(starts.insert(copy.bytes).second);
    // Each copy is its own: filling it leaves the others alone.
    std::memset(copy.bytes, i & 0xff, copies->copy_size());
    taken.push_back(copy);
    if (i == 0) CHECK(copies->chunks() == 1);
  }
  CHECK(copies->chunks() == 2);
  CHECK(endpoint->domain().registrations_held() == regions_before + 2);
  for (const auto& copy : taken) {
    for (size_t b = 0; b < copies->copy_size(); ++b) REQUIRE(copy.bytes[b] == (copy.index & 0xff));
  }

  // All out: the next waits for one back.
  ControlSendCopies::Copy none;
  CHECK(copies->take(&none) == ControlSendCopies::Take::kNone);
  copies->give_back(taken[77].index);
  ControlSendCopies::Copy again;
  REQUIRE(copies->take(&again) == ControlSendCopies::Take::kTaken);
  CHECK(again.index == 77);
  CHECK(again.bytes == taken[77].bytes);
  CHECK(again.descriptor == taken[77].descriptor);
  CHECK(copies->taken() == static_cast<size_t>(copies->limit()));

  copies.reset();  // deregisters its chunks
  CHECK(endpoint->domain().registrations_held() == regions_before);
}

TEST_CASE("control send copies taken and given back from several threads stay exclusive",
          "[unit][control_copies]") {
  auto endpoint = open_shm_endpoint();
  ControlSendCopies copies(*endpoint, 256, 64);
  std::atomic<int> overwritten{0}, waited{0}, failed{0};
  std::vector<std::thread> threads;
  for (int t = 1; t <= 4; ++t) {
    threads.emplace_back([&, t] {
      for (int n = 0; n < 20000; ++n) {
        ControlSendCopies::Copy copy;
        const auto taken = copies.take(&copy);
        // Catch's assertions are not for other threads: count instead.
        if (taken != ControlSendCopies::Take::kTaken) {
          (taken == ControlSendCopies::Take::kNone ? waited : failed).fetch_add(1);
          continue;
        }
        std::memset(copy.bytes, t, copies.copy_size());
        std::this_thread::yield();
        for (size_t b = 0; b < copies.copy_size(); ++b) {
          if (copy.bytes[b] != t) {
            overwritten.fetch_add(1);
            break;
          }
        }
        copies.give_back(copy.index);
      }
    });
  }
  for (auto& thread : threads) thread.join();
  CHECK(overwritten.load() == 0);
  CHECK(failed.load() == 0);
  CHECK(copies.taken() == 0);
}
