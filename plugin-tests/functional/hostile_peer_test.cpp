// A buggy or hostile peer must not hang, crash or corrupt its victim. One
// rank plays the peer with WEFT_OFI_TEST_HOSTILE (ofi/test_aids/wire_mutation.h):
// every message of one kind it sends has one field changed (slots,
// sequence numbers, message indices, keys, addresses, sizes, rail counts,
// tags). The other rank is an unchanged weft with one transfer posted. It
// must end that transfer in an error that says what went wrong, leave every
// byte outside its buffer alone, and close and finalize afterwards.
//
// Where the victim's own checks see the fault (most fields), the hostile
// rank stays connected until the victim is done, so the error must come
// from those checks. Where nothing the victim receives is wrong (a write
// that never comes, because the peer announced a segment it never wrote),
// the hostile rank leaves after two seconds and the liveness link must end
// the wait (Outcome).
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdlib>
#include <functional>
#include <string>

#include "log_capture.h"
#include "net_ops.h"
#include "pattern.h"
#include "two_rank.h"

using namespace weft;
using namespace weft::ft;

namespace {

constexpr size_t kPosted = 64 * 1024;
// The victim registers more than it posts: a write past the posted size
// would land in registered memory, which the NIC allows.
constexpr size_t kRegistered = kPosted + 8192;
constexpr int kTag = 7;

enum class Victim { kSender, kReceiver };

// What the victim may and must do.
enum class Outcome {
  // Its own checks see the fault: its transfer fails while the peer is
  // still connected, and the log says why.
  kSeen,
  // Nothing it receives is wrong (a group or segment announced that never
  // comes): its transfer fails once the peer leaves, through the liveness
  // link, and the log says the peer is gone.
  kPeerLeaves,
  // The fault hurts only the hostile peer (a sender writes where the
  // receiver's clear-to-send told it; the provider at the receiver checks
  // the key and address): the victim's send may succeed, fail, or (shm,
  // whose target drops such a write without an answer) wait until the
  // peer leaves. It must end.
  kAnyEnd,
};

struct HostileCase {
  const char* field;
  bool rdma;  // the field is the rdma protocol's (else the tagged protocol's)
  Victim victim;
  size_t message;  // bytes the sender sends
  Outcome outcome;
  // In the victim's WARN lines once its transfer failed.
  const char* victim_says;
};

constexpr size_t kLarge = 48 * 1024;  // written (above the eager size)
constexpr size_t kSmall = 200;        // eager
constexpr const char* kGone = "the peer is gone";
const HostileCase kCases[] = {
    {"cts-slot", true, Victim::kSender, kLarge, Outcome::kSeen, "protocol error"},
    {"cts-sequence", true, Victim::kSender, kLarge, Outcome::kPeerLeaves, kGone},
    {"cts-first-index", true, Victim::kSender, kLarge, Outcome::kSeen, "protocol error"},
    {"cts-rails", true, Victim::kSender, kLarge, Outcome::kSeen, "protocol error"},
    {"cts-count", true, Victim::kSender, kLarge, Outcome::kSeen, "protocol error"},
    {"cts-size", true, Victim::kSender, kLarge, Outcome::kSeen, "message truncated"},
    {"cts-key", true, Victim::kSender, kLarge, Outcome::kAnyEnd, ""},
    {"cts-address", true, Victim::kSender, kLarge, Outcome::kAnyEnd, ""},
    {"cts-tag", true, Victim::kSender, kLarge, Outcome::kSeen,
     "protocol error: the receiver posted no receive"},
    {"eager-index", true, Victim::kReceiver, kSmall, Outcome::kSeen, "protocol error"},
    {"eager-tag", true, Victim::kReceiver, kSmall, Outcome::kSeen, "protocol error"},
    {"write-slot", true, Victim::kReceiver, kLarge, Outcome::kSeen, "protocol error"},
    {"write-entry", true, Victim::kReceiver, kLarge, Outcome::kSeen, "protocol error"},
    {"write-segments", true, Victim::kReceiver, kLarge, Outcome::kPeerLeaves, kGone},
    {"write-oversize", true, Victim::kReceiver, kPosted + 4096, Outcome::kSeen, "protocol error"},
    {"tagged-size", false, Victim::kReceiver, kSmall, Outcome::kSeen,
     "the sender's message size says"},
};
constexpr int kCaseCount = static_cast<int>(std::size(kCases));

// The protocol in use: WEFT_TEST_PROTOCOL where weft chooses (auto), else
// the one set.
bool rdma_flavour() {
  const char* protocol = std::getenv("WEFT_TEST_PROTOCOL");
  if (protocol == nullptr) protocol = std::getenv("WEFT_OFI_PROTOCOL");
  return protocol != nullptr && std::string(protocol) == "rdma";
}

bool applies(int k) {
  return kCases[k].rdma == rdma_flavour();
}

// The victim's transfer: posting retried while the plugin asks for it, then
// polled to its end. An error from either call is the outcome.
ncclResult_t victim_transfer(const std::function<ncclResult_t(void**)>& post, NetClient& c,
                             const std::string& what) {
  void* req = nullptr;
  for (;;) {
    ncclResult_t res = post(&req);
    if (res != ncclSuccess) return res;
    if (req != nullptr) break;
    FT_DEADLINE(what + " (posting)");
  }
  for (;;) {
    ncclResult_t res = ncclSuccess;
    if (poll_once(c, req, &res, nullptr)) return res;
    FT_DEADLINE(what);
  }
}

// The hostile rank keeps its side going until the victim is done, or,
// where the victim cannot see the fault, for two seconds and then leaves.
void play_hostile(NetClient& c, void* req, Rank& rk, const HostileCase& hc) {
  const bool stays = hc.outcome == Outcome::kSeen;
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(stays ? 3600 : 2);
  bool finished = false;
  while (!rk.peer->readable() && std::chrono::steady_clock::now() < give_up) {
    ncclResult_t res = ncclSuccess;
    if (!finished && poll_once(c, req, &res, nullptr)) finished = true;
    FT_DEADLINE(std::string("waiting for the victim of ") + hc.field);
  }
  if (stays) FT_REQUIRE(rk.peer->recv_str() == "victim done", "out of step");
}

// The hostile rank closes with its own transfer still in flight, which
// waits WEFT_CLOSE_TIMEOUT_MS (2 s) for it; that wait is not under test
// here (conformance's [close] is), the victim's close is.
void set_hostile_env(const HostileCase& hc) {
  ::setenv("WEFT_OFI_TEST_HOSTILE", hc.field, 1);
  ::setenv("WEFT_CLOSE_TIMEOUT_MS", "100", 1);
}

void judge_victim(Rank& rk, const HostileCase& hc, ncclResult_t res, const std::string& what) {
  if (hc.outcome != Outcome::kAnyEnd) {
    FT_REQUIRE(res != ncclSuccess,
               what << " succeeded although the peer sent " << hc.field << " changed");
    const std::string warnings = logged_text(NCCL_LOG_WARN);
    FT_REQUIRE(warnings.find(hc.victim_says) != std::string::npos,
               what << " ended in " << result_name(res) << ", but the log does not say '"
                    << hc.victim_says << "'; it says:\n"
                    << warnings);
  }
  if (hc.outcome == Outcome::kSeen) rk.peer->send_str("victim done");
}

void receiver(int v, Rank& rk, const HostileCase& hc, bool hostile) {
  if (hostile) set_hostile_env(hc);
  auto c = load_plugin(v);
  FT_OK(c->init(capture_log));
  void* rc = recv_side_connect(*c, test_device(*c), *rk.peer);
  Buffer buf(kRegistered);
  buf.poison();
  {
    Mr mr(*c, rc, buf.data(), kRegistered);
    if (hostile) {
      play_hostile(*c, post_irecv1(*c, rc, buf.data(), kPosted, kTag, mr.get()), rk, hc);
    } else {
      const std::string what = std::string("the receive from a peer that changes ") + hc.field;
      void* data = buf.data();
      size_t size = kPosted;
      int tag = kTag;
      void* mh = mr.get();
      auto post = [&](void** req) { return c->irecv(rc, 1, &data, &size, &tag, &mh, req); };
      judge_victim(rk, hc, victim_transfer(post, *c, what), what);
      const std::string guards = buf.check_guards();
      FT_REQUIRE(guards.empty(), what << ": bytes outside the buffer changed: " << guards);
    }
  }
  FT_OK(c->close_recv(rc));
  FT_OK(c->finalize());
}

void sender(int v, Rank& rk, const HostileCase& hc, bool hostile) {
  if (hostile) set_hostile_env(hc);
  auto c = load_plugin(v);
  FT_OK(c->init(capture_log));
  void* sc = send_side_connect(*c, test_device(*c), *rk.peer);
  Buffer buf(hc.message);
  fill_pattern(buf.data(), hc.message, pattern_seed(71, 0));
  {
    Mr mr(*c, sc, buf.data(), hc.message);
    if (hostile) {
      play_hostile(*c, post_isend(*c, sc, buf.data(), hc.message, kTag, mr.get()), rk, hc);
    } else {
      const std::string what = std::string("the send to a peer that changes ") + hc.field;
      auto post = [&](void** req) {
        return c->isend(sc, buf.data(), hc.message, kTag, mr.get(), req);
      };
      judge_victim(rk, hc, victim_transfer(post, *c, what), what);
      const std::string guards = buf.check_guards();
      FT_REQUIRE(guards.empty(), what << ": bytes outside the buffer changed: " << guards);
    }
  }
  FT_OK(c->close_send(sc));
  FT_OK(c->finalize());
}

}  // namespace

TEST_CASE("a peer that sends wrong fields fails its victim's transfer, never hangs or corrupts it",
          "[hostile]") {
  const int v = GENERATE(filter(abi_version_selected, values({12})));
  const int k = GENERATE(filter(applies, range(0, kCaseCount)));
  const HostileCase& hc = kCases[k];
  INFO("field " << hc.field);
  const bool receiver_hostile = hc.victim == Victim::kSender;
  auto r = run_two([&](Rank& rk) { receiver(v, rk, hc, receiver_hostile); },
                   [&](Rank& rk) { sender(v, rk, hc, !receiver_hostile); });
  REQUIRE_RANKS(r);
}
