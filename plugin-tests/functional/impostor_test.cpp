// An impostor who knows weft's wire format (src/core/handle_header.h) and
// the listener's address, but was never handed its listen handle, never
// gets a comm (docs/security.md). Rank 1 is the attacker and then the
// genuine peer: it forges handles by every route an attacker has (listen
// ids guessed with a random secret, its own listener's handle with the
// victim's address written in, the handle of a listener the victim has
// closed, the genuine handle with one secret bit flipped) and connects with
// each, many at once, before the genuine connect. Rank 0 polls accept()
// all along: it may only ever return the genuine comm, which then carries
// checked bytes. The refusals cost the victim no fds and no memory that
// grows with their number, and its warnings stay rate-limited.
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/handle_header.h"
#include "log_capture.h"
#include "net_ops.h"
#include "pattern.h"
#include "proc_usage.h"
#include "two_rank.h"

using namespace weft;
using namespace weft::ft;

namespace {

constexpr size_t kTransportIdAt = 5;  // handle_header.h's layout
constexpr int kBatch = 64;            // connects in flight at once
constexpr size_t kMessage = 1 << 20;
constexpr uint64_t kWarmedUp = 1;
constexpr uint64_t kAttemptsDone = 2;
constexpr uint64_t kConnectNow = 3;

int attempts_wanted() {
  const char* text = std::getenv("WEFT_TEST_IMPOSTOR_ATTEMPTS");
  return text != nullptr && std::atoi(text) > 0 ? std::atoi(text) : 256;
}

ListenHandle decoded(const Handle& h) {
  ListenHandle out;
  std::string error;
  const auto transport = static_cast<TransportId>(static_cast<uint8_t>(h.bytes[kTransportIdAt]));
  FT_REQUIRE(decode_handle(h.bytes, sizeof h.bytes, transport, &out, &error),
             "the listener's own handle does not decode: " << error);
  return out;
}

Handle encoded(const ListenHandle& forged) {
  Handle h;
  encode_handle(forged, h.bytes);
  return h;
}

struct Forgery {
  std::string what;
  Handle handle;
};

std::vector<Forgery> forgeries(const Handle& victim, const Handle& closed, const Handle& own) {
  std::vector<Forgery> out;
  std::mt19937_64 rng(std::random_device{}());
  const ListenHandle genuine = decoded(victim);
  for (uint32_t id = 1; id <= 4; ++id) {
    ListenHandle guess = genuine;
    guess.listen_id = id;
    guess.secret = rng() | 1;
    out.push_back(
        {"listen id " + std::to_string(id) + " guessed, a random secret", encoded(guess)});
  }
  // The attacker's own listener on the same provider gives it a valid
  // fingerprint and a secret of its own; it writes in the victim's address.
  const ListenHandle mine = decoded(own);
  for (uint32_t id = 1; id <= 4; ++id) {
    ListenHandle copied = mine;
    copied.listen_id = id;
    copied.payload_size = genuine.payload_size;
    std::memcpy(copied.payload, genuine.payload, sizeof copied.payload);
    out.push_back(
        {"own handle with the victim's address, listen id " + std::to_string(id), encoded(copied)});
  }
  out.push_back({"the handle of a listener the victim closed", closed});
  for (int bit : {0, 31, 63}) {
    ListenHandle flipped = genuine;
    flipped.secret ^= uint64_t{1} << bit;
    out.push_back({"the genuine handle with secret bit " + std::to_string(bit) + " flipped",
                   encoded(flipped)});
  }
  return out;
}

struct Attempt {
  const Forgery* forgery = nullptr;
  Handle handle;  // connect() keeps its state in the handle's cookie
  bool done = true;
};

// Connects with forgeries, kBatch at once, until `count` have ended; each
// must end in an error on this side, never a comm.
void impersonate(NetClient& c, int dev, const std::vector<Forgery>& forged, int count) {
  std::vector<Attempt> slots(kBatch);
  int started = 0;
  int ended = 0;
  while (ended < count) {
    for (Attempt& slot : slots) {
      if (slot.done) {
        if (started == count) continue;
        slot.forgery = &forged[static_cast<size_t>(started++) % forged.size()];
        slot.handle = slot.forgery->handle;
        slot.done = false;
      }
      void* sc = nullptr;
      const ncclResult_t res = c.connect(dev, slot.handle.bytes, &sc);
      FT_REQUIRE(sc == nullptr, slot.forgery->what << ": connect returned a comm to the impostor");
      if (res != ncclSuccess) {
        slot.done = true;
        ++ended;
      }
    }
    FT_DEADLINE("impostor connects (" + std::to_string(ended) + " of " + std::to_string(count) +
                " ended)");
  }
}

// Polls accept() until the peer says something: no comm may come.
void refuse_until_told(NetClient& c, void* lc, Rank& rk, const std::string& phase) {
  while (!rk.peer->readable()) {
    void* rc = nullptr;
    FT_OK(c.accept(lc, &rc));
    FT_REQUIRE(rc == nullptr, phase << ": accept() returned a comm while only the impostor "
                                       "connected");
    FT_DEADLINE(phase);
  }
}

}  // namespace

TEST_CASE("an impostor who knows the wire format and the address never gets a comm", "[impostor]") {
  // The transport's promise, not the ABI's: the newest version selected.
  const int v = newest_selected_version();
  REQUIRE(v != 0);
  INFO("ABI v" << v);
  const int attempts = attempts_wanted();

  auto r = run_two(
      [&](Rank& rk) {  // the victim: listens, accepts only the genuine peer
        auto c = load_plugin(v);
        FT_OK(c->init(capture_log));
        const int dev = test_device(*c);
        HandedOver handles;
        void* lc = listen_and_hand_over(*c, dev, *rk.peer, &handles);

        refuse_until_told(*c, lc, rk, "the impostor's first round");
        FT_REQUIRE(rk.peer->recv_u64() == kWarmedUp, "out of step");
        const ProcUsage before = proc_usage();
        const auto started = std::chrono::steady_clock::now();
        logged_lines().clear();
        refuse_until_told(*c, lc, rk, "the impostor's " + std::to_string(attempts) + " attempts");
        FT_REQUIRE(rk.peer->recv_u64() == kAttemptsDone, "out of step");
        const ProcUsage after = proc_usage();
        const auto seconds = std::chrono::duration_cast<std::chrono::seconds>(
                                 std::chrono::steady_clock::now() - started)
                                 .count();
        if (std::getenv("WEFT_TEST_VERBOSE")) {
          std::fprintf(stderr, "impostor: %d refused in %lld s; before %s; after %s\n", attempts,
                       static_cast<long long>(seconds), to_string(before).c_str(),
                       to_string(after).c_str());
        }
        // A few may be in flight at either snapshot (a link connection not
        // yet refused); one kept per attempt would be hundreds.
        constexpr long kInFlight = 4;
        FT_REQUIRE(fds_besides_unix_sockets(after) <= fds_besides_unix_sockets(before) + kInFlight,
                   "refusing " << attempts << " impostor connects left fds open: before "
                               << to_string(before) << ", after " << to_string(after));
        FT_REQUIRE(after.unix_sockets <= before.unix_sockets + kInFlight,
                   "refusing impostor connects left Unix sockets open: before "
                       << to_string(before) << ", after " << to_string(after));
        // Whatever a refusal costs is returned: growth here is the
        // allocator's noise, not a per-attempt cost (256 attempts kept
        // would show as one allocation each).
        FT_REQUIRE(after.rss_kib - before.rss_kib <= 4096,
                   "VmRSS grew by " << after.rss_kib - before.rss_kib << " KiB over " << attempts
                                    << " refused connects");
        int refusals_logged = 0;
        for (const auto& line : logged_lines()) {
          if (line.level != NCCL_LOG_WARN) continue;
          FT_REQUIRE(line.text.find("refused a connect from") != std::string::npos,
                     "an impostor connect made the victim warn of something else: " << line.text);
          ++refusals_logged;
        }
        FT_REQUIRE(refusals_logged <= seconds + 2, refusals_logged
                                                       << " refusal warnings in " << seconds
                                                       << " s: they are limited to one a second");

        // The genuine peer now connects with the handle it was handed.
        rk.peer->send_u64(kConnectNow);
        void* rc = accept_until_ready(*c, lc);
        Buffer buf(kMessage);
        {
          Mr mr(*c, rc, buf.data(), buf.size());
          buf.poison();
          void* req = post_irecv1(*c, rc, buf.data(), kMessage, 7, mr.get());
          int got = wait_ok(*c, req, "the genuine peer's message");
          check_received(buf, got, kMessage, kMessage, pattern_seed(4200, 0),
                         "the genuine peer's message");
          rk.peer->sync("received");
        }
        void* extra = nullptr;
        FT_OK(c->accept(lc, &extra));
        FT_REQUIRE(extra == nullptr, "accept() returned a second comm after the genuine one");
        FT_OK(c->close_recv(rc));
        FT_OK(c->close_listen(lc));
        FT_OK(c->finalize());
      },
      [&](Rank& rk) {  // the impostor, then the genuine peer
        // An impostor's connect ends at the timeout: short, before init.
        ::setenv("WEFT_CONNECT_TIMEOUT_MS", "1000", 1);
        auto c = load_plugin(v);
        FT_OK(c->init(capture_log));
        const int dev = test_device(*c);
        Handle own;
        void* own_lc = do_listen(*c, dev, own);
        HandedOver handles = receive_handed_over(*rk.peer);
        Handle& genuine = handles.genuine;
        const std::vector<Forgery> forged = forgeries(genuine, handles.closed, own);

        impersonate(*c, dev, forged, static_cast<int>(forged.size()));
        rk.peer->send_u64(kWarmedUp);
        impersonate(*c, dev, forged, attempts);
        rk.peer->send_u64(kAttemptsDone);
        FT_REQUIRE(rk.peer->recv_u64() == kConnectNow, "out of step");
        // The genuine peer is another process in a job: a context of its
        // own, none of the impostor's connects pending in it.
        FT_OK(c->close_listen(own_lc));
        FT_OK(c->finalize());
        FT_OK(c->init(capture_log));

        logged_lines().clear();
        void* sc = nullptr;
        while (sc == nullptr) {
          const ncclResult_t res = c->connect(dev, genuine.bytes, &sc);
          FT_REQUIRE(res == ncclSuccess, "the genuine connect after the impostor's returned "
                                             << result_name(res) << "; warnings:\n"
                                             << logged_text(NCCL_LOG_WARN));
          FT_DEADLINE("the genuine connect after the impostor's");
        }
        Buffer buf(kMessage);
        {
          Mr mr(*c, sc, buf.data(), buf.size());
          fill_pattern(buf.data(), kMessage, pattern_seed(4200, 0));
          void* req = post_isend(*c, sc, buf.data(), kMessage, 7, mr.get());
          wait_ok(*c, req, "the genuine send");
          rk.peer->sync("received");
        }
        FT_OK(c->close_send(sc));
        FT_OK(c->finalize());
      });
  REQUIRE_RANKS(r);
}
