// connect() given corrupt or truncated handles: an error or a NULL comm for
// a bounded number of calls, never a crash; the real connection still works.
#include <sched.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>

#include "net_ops.h"
#include "pattern.h"
#include "two_rank.h"

using namespace weft;
using namespace weft::ft;

TEST_CASE("corrupt and truncated handles given to connect never crash", "[handles]") {
  const int v = GENERATE(filter(abi_version_selected, range(6, 13)));
  INFO("ABI v" << v);
  auto r = run_one([&](Rank&) {
    auto c = open_plugin(v);
    const int dev = test_device(*c);
    Handle good;
    void* lc = do_listen(*c, dev, good);

    // Each case derives its handle from the current genuine one (a case that
    // turns out equivalent consumes the listener, which is then replaced).
    using Make = std::function<Handle(const Handle&)>;
    std::vector<std::pair<std::string, Make>> cases;
    cases.push_back({"all-zero", [](const Handle&) { return Handle{}; }});
    for (uint64_t i = 0; i < 4; ++i) {
      cases.push_back({"random #" + std::to_string(i), [v, i](const Handle&) {
                         std::mt19937_64 rng(static_cast<uint64_t>(v) * 977 + i);
                         Handle h;
                         for (auto& b : h.bytes) b = static_cast<char>(rng());
                         return h;
                       }});
    }
    for (size_t keep : {1, 8, 16, 32, 64}) {
      cases.push_back(
          {"truncated to " + std::to_string(keep) + " bytes (rest zero)", [keep](const Handle& g) {
             Handle h = g;
             std::memset(h.bytes + keep, 0, sizeof h.bytes - keep);
             return h;
           }});
      cases.push_back({"truncated to " + std::to_string(keep) + " bytes (rest random)",
                       [keep](const Handle& g) {
                         std::mt19937_64 rng(keep);
                         Handle h = g;
                         for (size_t k = keep; k < sizeof h.bytes; ++k)
                           h.bytes[k] = static_cast<char>(rng());
                         return h;
                       }});
    }
    for (size_t pos = 0; pos < sizeof good.bytes; ++pos) {
      cases.push_back({"byte " + std::to_string(pos) + " flipped", [pos](const Handle& g) {
                         Handle h = g;
                         h.bytes[pos] = static_cast<char>(h.bytes[pos] ^ 0xff);
                         return h;
                       }});
    }

    int errors = 0, pending = 0, connected = 0;
    for (auto& [name, make] : cases) {
      Handle h = make(good);
      void *sc = nullptr, *rc = nullptr;
      ncclResult_t res = ncclSuccess;
      // Bounded number of calls; the same buffer each call, as NCCL does.
      // The listener is polled too, so a connection that reaches it is
      // examined there.
      for (int call = 0; call < 50 && !sc && res == ncclSuccess; ++call) {
        res = c->connect(dev, h.bytes, &sc);
        if (!rc) FT_OK(c->accept(lc, &rc));
        sched_yield();
      }
      // The listener accepted: its answer may still be on its way to the
      // connector (slow links, emulated CPUs), so finish the connect.
      for (int call = 0; call < 100000 && rc && !sc && res == ncclSuccess; ++call) {
        res = c->connect(dev, h.bytes, &sc);
        sched_yield();
      }
      if (std::getenv("WEFT_TEST_VERBOSE"))
        std::fprintf(stderr, "handles: %s -> %s, comm %p\n", name.c_str(), result_name(res), sc);
      FT_REQUIRE(res != ncclInProgress, name << ": connect returned ncclInProgress");
      if (res != ncclSuccess) {
        ++errors;
        if (sc) FT_OK(c->close_send(sc));  // NCCL closes a failed connect's comm
        sc = nullptr;
      } else if (sc) {
        // Equivalent handle (e.g. a byte the plugin does not use): it must
        // then pair with this listener like the genuine one. As many calls
        // as the connect above may take: the connector can be done before
        // its last message reached the listener, which a plugin may read at
        // most every so often (weft's links: every 500 us).
        for (int call = 0; call < 100000 && !rc; ++call) {
          FT_OK(c->accept(lc, &rc));
          if (!rc) sched_yield();
        }
        FT_REQUIRE(rc != nullptr, name << ": connect succeeded but the listener never accepted");
        ++connected;
      } else {
        ++pending;
        // Its request may reach the listener later (a provider with a
        // software handshake takes more calls than a socket): the next
        // case gets a listener of its own, which that request cannot name.
        if (!rc) {
          FT_OK(c->close_listen(lc));
          lc = do_listen(*c, dev, good);
        }
      }
      FT_REQUIRE(
          rc == nullptr || sc != nullptr,
          name << ": the listener accepted a connection whose connect failed or never completed");
      if (sc) FT_OK(c->close_send(sc));
      if (rc) {
        FT_OK(c->close_recv(rc));
        FT_OK(c->close_listen(lc));  // one accept per listen comm, as in NCCL
        lc = do_listen(*c, dev, good);
      }
    }
    std::fprintf(stderr,
                 "[handles v%d] %zu corrupt handles: %d errors, %d still pending, %d connected\n",
                 v, cases.size(), errors, pending, connected);

    // The genuine handle still connects and carries verified bytes.
    void *sc = nullptr, *rc = nullptr;
    while (!sc || !rc) {
      if (!sc) {
        ncclResult_t res = c->connect(dev, good.bytes, &sc);
        FT_REQUIRE(res == ncclSuccess,
                   "the genuine handle no longer connects after the corrupt ones were "
                   "tried: connect returned "
                       << result_name(res));
      }
      if (!rc) FT_OK(c->accept(lc, &rc));
      FT_DEADLINE("connecting with the genuine handle after corrupt ones");
    }
    FT_OK(c->close_listen(lc));
    Buffer sbuf(65536), rbuf(65536);
    fill_pattern(sbuf.data(), 65536, pattern_seed(12, 12));
    {
      Mr ms(*c, sc, sbuf.data(), 65536), mr(*c, rc, rbuf.data(), 65536);
      std::vector<Pending> reqs(2);
      reqs[1].req = post_irecv1(*c, rc, rbuf.data(), 65536, 0, mr.get());
      reqs[1].what = "receive";
      reqs[0].req =
          post_isend(*c, sc, sbuf.data(), 65536, 0, ms.get(), [&] { progress(*c, reqs); });
      reqs[0].what = "send";
      wait_all(*c, reqs);
      FT_REQUIRE(reqs[1].sizes[0] == 65536, "size " << reqs[1].sizes[0]);
      check_received(rbuf.data(), 65536, 65536, pattern_seed(12, 12), "genuine connection");
    }
    FT_OK(c->close_send(sc));
    FT_OK(c->close_recv(rc));
    FT_OK(c->finalize());
  });
  REQUIRE_RANKS(r);
}
