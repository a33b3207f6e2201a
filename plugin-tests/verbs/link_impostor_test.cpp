// A link impostor (docs/security.md): while two processes have a verbs comm
// over the liveness link between them, a third party that can reach the
// victim's link port opens raw TCP connections to it, says hello as weft
// with the genuine peer's token (stolen from a handle of the peer's) or a
// guessed one, and a proof that is a guess or a closed listener's secret,
// then sends a mailbox message. Each connection must get only the refusal
// frame and be closed: its message is never read (a message to a mailbox
// that is not open would be answered). The victim accepts no comm from it,
// and its comm with the genuine peer, whose link the impostor claimed,
// neither fails nor stalls: after the grace a vanished link gets, it still
// carries checked bytes.
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "core/byte_codec.h"
#include "core/fd.h"
#include "core/handle_header.h"
#include "core/link_messages.h"
#include "core/peer_links.h"
#include "core/socket_address.h"
#include "net_ops.h"
#include "pattern.h"
#include "two_rank.h"

using namespace weft;
using namespace weft::ft;

namespace {

constexpr size_t kMessage = 256 << 10;

// A verbs listen handle's payload (verbs/wire.h): the hub's address, then
// the listening process's link identity and the listen comm's mailbox.
struct LinkTarget {
  PeerIdentity process;
  uint32_t mailbox = 0;
  uint64_t secret = 0;
};

LinkTarget link_target(const Handle& handle) {
  ListenHandle decoded;
  std::string error;
  FT_REQUIRE(decode_handle(handle.bytes, sizeof handle.bytes, TransportId::Verbs, &decoded, &error),
             "not a verbs handle: " << error);
  constexpr size_t kAt = SocketAddress::kPackedSize;
  FT_REQUIRE(decoded.payload_size == kAt + PeerIdentity::kPackedSize + 4,
             "the handle names no liveness link (payload of " << int(decoded.payload_size)
                                                              << " bytes): links are off?");
  LinkTarget target;
  FT_REQUIRE(PeerIdentity::unpack(decoded.payload + kAt, PeerIdentity::kPackedSize, &target.process,
                                  &error),
             "link identity in the handle: " << error);
  target.mailbox = get_le32(decoded.payload + kAt + PeerIdentity::kPackedSize);
  target.secret = decoded.secret;
  return target;
}

// Connects to `at`, sends a hello (`token`, `proof`) and a message to
// `mailbox` that asks for an answer, and returns what came back before
// the victim closed the connection.
std::vector<uint8_t> impersonate(const SocketAddress& at, uint64_t token, uint64_t proof,
                                 uint32_t mailbox) {
  Fd fd(::socket(at.family(), SOCK_STREAM | SOCK_CLOEXEC, 0));
  FT_REQUIRE(fd.valid(), "socket: " << std::strerror(errno));
  FT_REQUIRE(::connect(fd.get(), reinterpret_cast<const sockaddr*>(&at.storage), at.length) == 0,
             "connecting to the victim's link port " << at.text() << ": " << std::strerror(errno));
  const char payload[] = "forged connection info";
  std::vector<uint8_t> bytes(kLinkHelloSize + kLinkFrameHeaderSize + sizeof payload);
  encode_link_hello(LinkHello{token, proof}, bytes.data());
  LinkFrameHeader header;
  header.kind = 1;
  header.length = sizeof payload;
  header.to = mailbox;
  header.from = 5;  // an open mailbox would take it; a closed one answers
  encode_link_frame_header(header, bytes.data() + kLinkHelloSize);
  std::memcpy(bytes.data() + kLinkHelloSize + kLinkFrameHeaderSize, payload, sizeof payload);
  FT_REQUIRE(::send(fd.get(), bytes.data(), bytes.size(), MSG_NOSIGNAL) ==
                 static_cast<ssize_t>(bytes.size()),
             "sending the forged hello: " << std::strerror(errno));
  std::vector<uint8_t> answer;
  for (;;) {
    pollfd entry{fd.get(), POLLIN, 0};
    ::poll(&entry, 1, 50);
    uint8_t buffer[256];
    ssize_t n = ::recv(fd.get(), buffer, sizeof buffer, MSG_DONTWAIT);
    if (n == 0) break;  // the victim closed it
    if (n > 0) answer.insert(answer.end(), buffer, buffer + n);
    FT_DEADLINE("the victim closing a forged link connection");
  }
  return answer;
}

bool is_refusal(const std::vector<uint8_t>& answer) {
  LinkFrameHeader header;
  std::string error;
  return answer.size() == kLinkFrameHeaderSize &&
         decode_link_frame_header(answer.data(), &header, &error) && header.kind == kLinkRefused &&
         header.length == 0;
}

void transfer(NetClient& c, void* comm, bool sender, uint64_t seed, const std::string& what) {
  Buffer buf(kMessage);
  Mr mr(c, comm, buf.data(), buf.size());
  if (sender) {
    fill_pattern(buf.data(), kMessage, seed);
    wait_ok(c, post_isend(c, comm, buf.data(), kMessage, 7, mr.get()), what);
    return;
  }
  buf.poison();
  int got = wait_ok(c, post_irecv1(c, comm, buf.data(), kMessage, 7, mr.get()), what);
  check_received(buf, got, kMessage, kMessage, seed, what);
}

}  // namespace

TEST_CASE("a link impostor with a stolen token gets no link, no message read, no comm",
          "[link_impostor]") {
  auto r = run_two(
      [&](Rank& rk) {  // the victim
        auto c = open_plugin(12);
        const int dev = test_device(*c);
        HandedOver handles;
        void* lc = listen_and_hand_over(*c, dev, *rk.peer, &handles);
        void* rc = accept_until_ready(*c, lc);
        transfer(*c, rc, false, pattern_seed(4300, 0), "before the impostor");
        // While the impostor works, and through the grace a vanished link
        // gets: a receive is pending (its comm watches the link), accept
        // is polled, nothing may come or fail.
        Buffer buf(kMessage);
        {
          Mr mr(*c, rc, buf.data(), buf.size());
          buf.poison();
          void* req = post_irecv1(*c, rc, buf.data(), kMessage, 7, mr.get());
          bool done = false;
          int got = 0;
          while (!done) {
            void* extra = nullptr;
            FT_OK(c->accept(lc, &extra));
            FT_REQUIRE(extra == nullptr, "accept() returned a comm the impostor asked for");
            ncclResult_t res = ncclSuccess;
            done = poll_once(*c, req, &res, &got);
            FT_REQUIRE(res == ncclSuccess,
                       "the genuine comm failed while the impostor claimed "
                       "its peer's link: "
                           << result_name(res));
            FT_DEADLINE("the genuine message after the impostor");
          }
          check_received(buf, got, kMessage, kMessage, pattern_seed(4300, 1), "after the impostor");
        }
        rk.peer->sync("done");
        FT_OK(c->close_recv(rc));
        FT_OK(c->close_listen(lc));
        FT_OK(c->finalize());
      },
      [&](Rank& rk) {  // the genuine peer, and the impostor's raw sockets
        auto c = open_plugin(12);
        const int dev = test_device(*c);
        HandedOver handles = receive_handed_over(*rk.peer);
        Handle& genuine = handles.genuine;
        void* sc = connect_until_ready(*c, dev, genuine);
        transfer(*c, sc, true, pattern_seed(4300, 0), "before the impostor");
        // The token the victim files this process's link under, as any
        // handle of this process shows it.
        Handle own;
        void* own_lc = do_listen(*c, dev, own);
        const uint64_t stolen = link_target(own).process.token;
        const LinkTarget victim = link_target(genuine);
        const LinkTarget stale = link_target(handles.closed);
        std::mt19937_64 rng(std::random_device{}());
        struct Try {
          const char* what;
          uint64_t token;
          uint64_t proof;
          uint32_t mailbox;
        };
        const Try tries[] = {
            {"the genuine peer's token, a guessed proof", stolen, rng() | 1, victim.mailbox},
            {"the genuine peer's token, a closed listener's secret", stolen, stale.secret,
             victim.mailbox},
            {"the genuine peer's token, to a mailbox never opened", stolen, rng() | 1, 0x7ffffff0},
            {"a guessed token, a guessed proof", rng() | 1, rng() | 1, victim.mailbox},
        };
        for (const Try& t : tries) {
          for (int round = 0; round < 8; ++round) {
            const std::vector<uint8_t> answer =
                impersonate(victim.process.address, t.token, t.proof, t.mailbox);
            FT_REQUIRE(is_refusal(answer), t.what << ": the victim answered " << answer.size()
                                                  << " bytes, not the refusal frame alone");
          }
        }
        // Past the second a vanished link is given before its comms fail.
        std::this_thread::sleep_for(std::chrono::milliseconds(1500));
        transfer(*c, sc, true, pattern_seed(4300, 1), "after the impostor");
        rk.peer->sync("done");
        FT_OK(c->close_send(sc));
        FT_OK(c->close_listen(own_lc));
        FT_OK(c->finalize());
      });
  REQUIRE_RANKS(r);
}
