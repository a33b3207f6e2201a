#include "ofi/endpoint/message_matcher.h"

#include <rdma/fi_errno.h>

#include <catch2/catch.hpp>
#include <cstring>
#include <string>
#include <vector>

#include "ofi/endpoint/tag_layout.h"

using namespace weft;
using namespace weft::ofi;

namespace {

constexpr size_t kSlot = 64;

struct Pool {
  std::vector<uint8_t> bytes = std::vector<uint8_t>(8 * kSlot);
  MessageMatcher matcher{8, bytes.data(), kSlot};
  // Writes `text` into pool slot `slot` as the provider would.
  size_t fill(int slot, const std::string& text) {
    std::memcpy(bytes.data() + slot * kSlot, text.data(), text.size());
    return text.size();
  }
  std::vector<MessageMatcher::Completion> drain() {
    std::vector<MessageMatcher::Completion> out;
    matcher.drain([&](const MessageMatcher::Completion& c) { out.push_back(c); });
    return out;
  }
};

}  // namespace

TEST_CASE("compact tags carry the kind and a 30-bit id, and only control tags", "[unit][matcher]") {
  for (uint64_t tag : {kConnectInboxTag, ack_tag(7), cts_tag(kMaxCompactId), eager_tag(12345)}) {
    uint32_t compact = 0;
    REQUIRE(compact_tag(tag, &compact));
    CHECK(expand_tag(compact) == tag);
  }
  uint32_t compact = 0;
  CHECK_FALSE(compact_tag(data_tag(5, 0), &compact));
  CHECK_FALSE(compact_tag(eager_tag(kMaxCompactId + 1), &compact));
  uint32_t a = 0, b = 0;
  REQUIRE(compact_tag(cts_tag(9), &a));
  REQUIRE(compact_tag(eager_tag(9), &b));
  CHECK(a != b);
}

TEST_CASE("a message goes to the oldest receive posted for its tag, bytes copied",
          "[unit][matcher]") {
  Pool pool;
  pool.matcher.open_id(3);
  OpContext first, second, other;
  char a[16] = {}, b[16] = {}, c[16] = {};
  int released = 0;
  pool.matcher.post(eager_tag(3), a, sizeof(a), &first, &released);
  pool.matcher.post(eager_tag(3), b, sizeof(b), &second, &released);
  pool.matcher.post(cts_tag(3), c, sizeof(c), &other, &released);
  CHECK(released == -1);
  CHECK(pool.matcher.arrive(eager_tag(3), 2, pool.fill(2, "hello")));
  CHECK(pool.matcher.arrive(eager_tag(3), 5, pool.fill(5, "world!")));
  auto done = pool.drain();
  REQUIRE(done.size() == 2);
  CHECK(done[0].context == &first);
  CHECK(done[0].length == 5);
  CHECK(done[0].error == 0);
  CHECK(std::string(a, 5) == "hello");
  CHECK(done[1].context == &second);
  CHECK(std::string(b, 6) == "world!");
  CHECK(c[0] == 0);  // another tag's receive is untouched
}

TEST_CASE("a message with no receive is held in its slot until one is posted", "[unit][matcher]") {
  Pool pool;
  pool.matcher.open_id(4);
  CHECK_FALSE(pool.matcher.arrive(ack_tag(4), 6, pool.fill(6, "early")));
  CHECK(pool.matcher.held() == 1);
  CHECK(pool.drain().empty());
  OpContext op;
  char buffer[16] = {};
  int released = -1;
  pool.matcher.post(ack_tag(4), buffer, sizeof(buffer), &op, &released);
  CHECK(released == 6);  // the slot may be posted again
  CHECK(pool.matcher.held() == 0);
  auto done = pool.drain();
  REQUIRE(done.size() == 1);
  CHECK(done[0].context == &op);
  CHECK(std::string(buffer, 5) == "early");
}

TEST_CASE("a message larger than the receive is a truncation, nothing copied", "[unit][matcher]") {
  Pool pool;
  pool.matcher.open_id(2);
  OpContext op;
  char buffer[4] = {'x', 'x', 'x', 'x'};
  int released = -1;
  pool.matcher.post(ack_tag(2), buffer, sizeof(buffer), &op, &released);
  CHECK(pool.matcher.arrive(ack_tag(2), 0, pool.fill(0, "too long")));
  auto done = pool.drain();
  REQUIRE(done.size() == 1);
  CHECK(done[0].error == kTruncated);
  CHECK(done[0].overflow == 4);
  CHECK(std::string(buffer, 4) == "xxxx");
}

TEST_CASE("cancel removes a posted receive and reports it cancelled", "[unit][matcher]") {
  Pool pool;
  pool.matcher.open_id(8);
  OpContext kept, gone;
  char a[8] = {}, b[8] = {};
  int released = -1;
  pool.matcher.post(cts_tag(8), a, sizeof(a), &gone, &released);
  pool.matcher.post(cts_tag(8), b, sizeof(b), &kept, &released);
  CHECK(pool.matcher.cancel(&gone));
  CHECK_FALSE(pool.matcher.cancel(&gone));  // not posted any more
  auto done = pool.drain();
  REQUIRE(done.size() == 1);
  CHECK(done[0].context == &gone);
  CHECK(done[0].error == FI_ECANCELED);
  CHECK(pool.matcher.arrive(cts_tag(8), 1, pool.fill(1, "cts")));
  done = pool.drain();
  REQUIRE(done.size() == 1);
  CHECK(done[0].context == &kept);
}

TEST_CASE("messages for closed or unknown ids are dropped, not held", "[unit][matcher]") {
  Pool pool;
  CHECK(pool.matcher.arrive(eager_tag(9), 0, pool.fill(0, "stray")));  // never opened
  pool.matcher.open_id(9);
  CHECK_FALSE(pool.matcher.arrive(eager_tag(9), 1, pool.fill(1, "late")));
  CHECK_FALSE(pool.matcher.arrive(cts_tag(9), 2, pool.fill(2, "late")));
  std::vector<int> released;
  pool.matcher.close_id(9, &released);
  CHECK(released.size() == 2);
  CHECK(pool.matcher.held() == 0);
  CHECK(pool.matcher.arrive(eager_tag(9), 3, pool.fill(3, "after")));
  CHECK(pool.matcher.dropped() == 4);
  CHECK(pool.drain().empty());
}

TEST_CASE("a tagged message keeps its CQ data, also while it waits for its receive",
          "[unit][matcher]") {
  Pool pool;
  pool.matcher.open_id(5);
  OpContext posted, late;
  char a[16] = {}, b[16] = {};
  int released = 0;
  pool.matcher.post(eager_tag(5), a, sizeof(a), &posted, &released);
  const uint64_t immediate = 0x1234abcdull, other = 77;
  CHECK(pool.matcher.arrive(eager_tag(5), 1, pool.fill(1, "now"), &immediate));
  CHECK_FALSE(pool.matcher.arrive(eager_tag(5), 3, pool.fill(3, "later"), &other));
  CHECK_FALSE(pool.matcher.arrive(cts_tag(5), 4, pool.fill(4, "plain")));
  pool.matcher.post(eager_tag(5), b, sizeof(b), &late, &released);
  CHECK(released == 3);
  auto done = pool.drain();
  REQUIRE(done.size() == 2);
  CHECK((done[0].has_data && done[0].data == immediate));
  CHECK((done[1].has_data && done[1].data == other));
  CHECK(std::string(b, 5) == "later");
  OpContext plain;
  char c[16] = {};
  pool.matcher.post(cts_tag(5), c, sizeof(c), &plain, &released);
  done = pool.drain();
  REQUIRE(done.size() == 1);
  CHECK_FALSE(done[0].has_data);
}

TEST_CASE("cancel finds a receive through its context among many, and only while posted",
          "[unit][matcher]") {
  Pool pool;
  constexpr int kComms = 2000, kEach = 4;
  std::vector<OpContext> ops(kComms * kEach);
  std::vector<char> buffers(ops.size() * 16);
  int released = 0;
  for (int comm = 1; comm <= kComms; ++comm) {
    pool.matcher.open_id(static_cast<uint32_t>(comm));
    for (int k = 0; k < kEach; ++k) {
      const size_t i = static_cast<size_t>((comm - 1) * kEach + k);
      pool.matcher.post(eager_tag(static_cast<uint32_t>(comm)), &buffers[i * 16], 16, &ops[i],
                        &released);
    }
  }
  // The middle one of a comm's queue, then the rest of it: the queue
  // stays linked (a later message goes to the right receive).
  const uint32_t comm = 1234;
  OpContext* mine = &ops[(comm - 1) * kEach];
  CHECK(pool.matcher.cancel(&mine[1]));
  CHECK_FALSE(pool.matcher.cancel(&mine[1]));  // no longer posted
  CHECK(pool.matcher.arrive(eager_tag(comm), 0, pool.fill(0, "x")));
  auto done = pool.drain();
  REQUIRE(done.size() == 2);
  CHECK((done[0].context == &mine[1] && done[0].error == FI_ECANCELED));
  CHECK((done[1].context == &mine[0] && done[1].error == 0));
  CHECK_FALSE(pool.matcher.cancel(&mine[0]));  // matched already
  CHECK(pool.matcher.cancel(&mine[3]));
  CHECK(pool.matcher.cancel(&mine[2]));
  CHECK(pool.matcher.arrive(eager_tag(comm + 1), 1, pool.fill(1, "y")));
  done = pool.drain();
  REQUIRE(done.size() == 3);
  CHECK(done[2].context == &ops[comm * kEach]);
}

namespace {

// Takes what its `accept` says, recording every offer.
struct RecordingSink final : EagerSink {
  bool take(const uint8_t* bytes, size_t length, const uint64_t* data, bool behind) override {
    offers.push_back(std::string(reinterpret_cast<const char*>(bytes), length));
    behinds.push_back(behind);
    datas.push_back(data != nullptr ? *data : 0);
    return accept && !behind;
  }
  bool accept = true;
  std::vector<std::string> offers;
  std::vector<bool> behinds;
  std::vector<uint64_t> datas;
};

}  // namespace

TEST_CASE("a sink takes its tag's messages from the pool before any posted receive",
          "[unit][matcher]") {
  Pool pool;
  pool.matcher.open_id(5);
  RecordingSink sink;
  pool.matcher.attach_sink(eager_tag(5), &sink);
  OpContext bounce, other;
  char buffer[16] = {}, cts[16] = {};
  int released = 0;
  pool.matcher.post(eager_tag(5), buffer, sizeof(buffer), &bounce, &released);
  pool.matcher.post(cts_tag(5), cts, sizeof(cts), &other, &released);
  const uint64_t data = 0x1234;
  // Taken: the slot is free again, the posted receive untouched.
  CHECK(pool.matcher.arrive(eager_tag(5), 1, pool.fill(1, "direct"), &data));
  REQUIRE(sink.offers == std::vector<std::string>{"direct"});
  CHECK(sink.datas[0] == 0x1234);
  CHECK_FALSE(sink.behinds[0]);
  CHECK(pool.drain().empty());
  CHECK(buffer[0] == 0);
  // Another tag of the same id never reaches the sink.
  CHECK(pool.matcher.arrive(cts_tag(5), 2, pool.fill(2, "cts")));
  CHECK(sink.offers.size() == 1);
  // Left by the sink: the posted receive gets it, as without one.
  sink.accept = false;
  CHECK(pool.matcher.arrive(eager_tag(5), 3, pool.fill(3, "bounced")));
  auto done = pool.drain();
  REQUIRE(done.size() == 2);
  CHECK(done[1].context == &bounce);
  CHECK(std::string(buffer, 7) == "bounced");
  // Nothing posted: held, and the next one is offered as behind it.
  CHECK_FALSE(pool.matcher.arrive(eager_tag(5), 4, pool.fill(4, "held")));
  sink.accept = true;
  CHECK_FALSE(pool.matcher.arrive(eager_tag(5), 6, pool.fill(6, "after")));
  CHECK(sink.behinds.back());
  CHECK(pool.matcher.held() == 2);
  // Detached: held messages go to receives in order, nothing is offered.
  pool.matcher.detach_sink(eager_tag(5));
  const size_t offered = sink.offers.size();
  pool.matcher.post(eager_tag(5), buffer, sizeof(buffer), &bounce, &released);
  CHECK(released == 4);
  CHECK(std::string(buffer, 4) == "held");
  CHECK(pool.matcher.arrive(eager_tag(5), 7, pool.fill(7, "late")) == false);
  CHECK(sink.offers.size() == offered);
}

TEST_CASE("a sink's tag stays known while nothing is posted or held for it", "[unit][matcher]") {
  Pool pool;
  pool.matcher.open_id(6);
  RecordingSink sink;
  pool.matcher.attach_sink(eager_tag(6), &sink);
  OpContext bounce;
  char buffer[16] = {};
  int released = 0;
  // A cancel that empties the tag's queues must not forget the sink.
  pool.matcher.post(eager_tag(6), buffer, sizeof(buffer), &bounce, &released);
  REQUIRE(pool.matcher.cancel(&bounce));
  CHECK(pool.matcher.arrive(eager_tag(6), 0, pool.fill(0, "still")));
  CHECK(sink.offers == std::vector<std::string>{"still"});
  // Closing the id forgets it: its messages are dropped, not offered.
  std::vector<int> freed;
  pool.matcher.close_id(6, &freed);
  CHECK(pool.matcher.arrive(eager_tag(6), 1, pool.fill(1, "gone")));
  CHECK(sink.offers.size() == 1);
  CHECK(pool.matcher.dropped() == 1);
}
