// Liveness of peer processes without their help: one TCP connection per
// pair of weft processes, opened when the first comm between them
// connects and kept open while both have weft initialized. The peer's
// kernel closes it when the process dies (FIN or RST, whatever the process
// was doing), and TCP keepalive probes, which the peer's kernel answers,
// notice a host or network that vanished. Neither needs the peer to call
// weft, so a peer that is alive but busy (computing, not polling) is never
// taken for dead, and nothing is sent or checked per message: a comm with
// requests pending looks at its link at most every 200 ms.
//
// Each process listens on one socket (WEFT_SOCKET_IFNAME picks the
// interface) and names itself by a random token. Connect requests and
// their acknowledgements carry the token and that address (PeerIdentity);
// each side asks for a link to the other (link_to): the first to ask
// opens it and sends a hello with its own token, the other files the
// accepted connection under that token and uses it too. Links are shared
// by every comm between the two processes, in both directions.
//
// Tokens are public (they travel in connect requests and verbs handles),
// so a hello also proves that its sender was let in (docs/security.md):
// it carries either the accepting process's link key, a secret that
// process sends only to peers that connected with one of its listen
// handles' secrets (in a connect acknowledgement) or to listeners it
// connects to (in a connect request), or the secret of one of its listen
// comms still open (admit(): the verbs transport sets up comms over the
// link before any acknowledgement). A hello that proves neither gets one
// refusal frame (link_messages.h: kLinkRefused) and its connection is
// closed: no link is filed, no message it carries reaches a mailbox.
//
// A link also carries messages between mailboxes (link_messages.h): the
// verbs transport sets up its comms over it instead of a TCP connection
// each. Nothing is sent on a link after setup.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/connection_fault.h"
#include "core/held_by_comms.h"
#include "core/link_messages.h"
#include "core/socket_address.h"
#include "core/tcp_channel.h"

namespace weft {

// Who a peer process is and where its links are accepted. Packed (in
// handles and connect requests): 0 token u64 little-endian (0: the process
// offers no link), 8 its address, SocketAddress's packed form.
struct PeerIdentity {
  uint64_t token = 0;
  SocketAddress address;

  static constexpr size_t kPackedSize = 8 + SocketAddress::kPackedSize;  // 32
  void pack(uint8_t* out) const;
  // A zero token unpacks without an address (nothing else is read).
  static bool unpack(const uint8_t* in, size_t size, PeerIdentity* out, std::string* error);
};

// The hello a connecting process sends on a new link: 0 magic u32 "WFTL",
// 4 version u8 (3: with a proof; 2 had none, 1 carried no messages),
// 5 zero u8[3], 8 token u64, 16 proof u64 (the accepting process's link
// key or one of its open listen secrets); little-endian.
constexpr size_t kLinkHelloSize = 24;
struct LinkHello {
  uint64_t token = 0;
  uint64_t proof = 0;
};
void encode_link_hello(const LinkHello& hello, uint8_t* out);
bool decode_link_hello(const uint8_t* in, LinkHello* hello, std::string* error);

class LinkRouter;

class PeerLink : public std::enable_shared_from_this<PeerLink> {
 public:
  enum class Health : uint8_t {
    kUnknown,  // not connected (yet, or the peer is unreachable): no verdict
    kAlive,
    kGone,  // the peer's process or host is gone; reason() says how
  };

  // `router`: where its messages go and its sockets are watched (null:
  // every message is answered as if no mailbox were open).
  PeerLink(std::string name, int timeout_ms, std::shared_ptr<LinkRouter> router = nullptr);
  ~PeerLink();
  PeerLink(const PeerLink&) = delete;
  PeerLink& operator=(const PeerLink&) = delete;

  // An outbound link still connecting sends `hello` once connected.
  void add_connecting(TcpStream stream, const LinkHello& hello);
  void add_accepted(TcpStream stream);
  // One non-blocking look at each connection (any thread; a caller that
  // finds another thread looking gets kUnknown); messages that arrived go
  // to their mailboxes. kGone stays.
  Health check(std::string* reason);
  const std::string& name() const { return name_; }

  // kNow: sent as far as the socket takes it now. kPump: queued for the
  // next PeerLinks::pump() (or check()), which sends what queued meanwhile
  // at once; for a message whose sender pumps next, waiting for the answer.
  enum class Flush : uint8_t { kNow, kPump };
  // Queues a message for mailbox `to` of the peer's process, sent as its
  // socket takes it (from `when` on, and by check() and PeerLinks::pump()).
  // False, with *why, when nothing can carry it: the link is gone, or could
  // not be opened.
  bool send(uint8_t kind, uint32_t to, uint32_t from, std::span<const uint8_t> payload,
            std::string* why, Flush when = Flush::kNow);
  // Whether messages can still reach the peer (what send() would say).
  bool usable(std::string* why);
  // A connection is still connecting, or messages wait to be sent.
  bool busy() const { return busy_.load(std::memory_order_acquire); }
  // The last connection tried was refused by the peer's host (nothing
  // listens at the link's address), and none is up: its process is gone,
  // or a firewall resets the port. No verdict by itself (ListenerWatch).
  bool refused_by_host();

 private:
  friend class PeerLinks;
  struct Connection {
    TcpStream stream;
    enum class State : uint8_t { kConnecting, kHello, kUp } state = State::kUp;
    uint8_t hello[kLinkHelloSize] = {};
    std::vector<uint8_t> in;   // the first bytes of a message, until all arrived
    std::vector<uint8_t> out;  // messages the socket has not taken yet
    size_t out_sent = 0;
    bool refused = false;  // the peer answered its hello with kLinkRefused
  };
  // Drives a connection one step; "" while it is fine, else why the peer
  // is gone. *dropped when this side could not reach the peer at all.
  std::string step(Connection& connection, bool* dropped);
  // Reads what arrived and hands whole messages to their mailboxes; "" or
  // why the peer is gone (closed, failed, or sent what is not a message).
  std::string receive(Connection& connection);
  // Sends queued messages as far as the socket takes them; "" or why not.
  std::string flush(Connection& connection);
  // Why a read or write with errno `error` (0: end of stream) failed.
  std::string closed_reason(const Connection& connection, int error) const;
  // With the lock held: steps every connection (or only the one on `fd`,
  // when >= 0) and records the verdict.
  void service_locked(int fd);
  // For PeerLinks::pump(): the connection on `fd` has something to read,
  // or (fd -1) this link has connections to finish or messages to send.
  void service(int fd);
  void add_locked(std::unique_ptr<Connection> connection);
  // A connect that failed at once: `refused` when the host said ECONNREFUSED.
  void note_refused(bool refused, const std::string& problem);
  // The verdict kGone, for good: its sockets are no longer watched.
  void mark_gone_locked(const std::string& reason);
  void drop_locked(size_t index);
  bool usable_locked(std::string* why) const;
  void update_busy_locked();
  // Not gone, and no connection (none could be opened, or the peer refused
  // its hello): link_to opens another.
  bool reopenable();

  std::string name_;
  int timeout_ms_;
  std::shared_ptr<LinkRouter> router_;
  std::mutex mutex_;
  std::vector<std::unique_ptr<Connection>> connections_;
  Health health_ = Health::kUnknown;
  std::string reason_;
  bool unreachable_logged_ = false;
  std::string unreachable_;    // why the last connection was dropped
  bool host_refused_ = false;  // its error was ECONNREFUSED
  // A connection is still connecting or has messages to send: pump() steps it.
  std::atomic<bool> busy_{false};
};

class PeerLinks;

// While a connect waits for its listener's answer: whether the listening
// process is gone. Its link (opened now, the hello proven by the listen's
// secret, which the listener admits) fails as a peer's does once the
// process dies; a process that was already gone leaves nothing listening
// at its link's address, and its host refuses every try. Without this, a
// connect to a listener killed before it accepted waited for
// WEFT_CONNECT_TIMEOUT_MS on providers that neither deliver nor fail the
// request (tcp).
class ListenerWatch {
 public:
  // Refusals for this long, with no answer meanwhile, are a verdict.
  static constexpr std::chrono::seconds kRefusedFor{2};
  // Nothing set (no links, or the handle names no process): never fails.
  void watch(std::shared_ptr<PeerLinks> links, const PeerIdentity& listener, uint64_t secret,
             std::string name);
  // ncclRemoteError (logged, naming device and peer) once the listening
  // process is gone; looks at most every 200 ms.
  ncclResult_t check(const std::string& device, const std::string& peer);

 private:
  std::shared_ptr<PeerLinks> links_;
  PeerIdentity listener_;
  uint64_t secret_ = 0;
  std::string name_;
  std::chrono::steady_clock::time_point next_look_{};
  std::chrono::steady_clock::time_point refused_since_{};
  ConnectionFault fault_;
};

class PeerLinks {
 public:
  // Listens on `local` (port 0). timeout_ms: how long a vanished host may
  // stay silent (keepalive) before its links count as gone.
  static std::shared_ptr<PeerLinks> open(const SocketAddress& local, int timeout_ms,
                                         std::string* error);

  const PeerIdentity& identity() const { return identity_; }
  // What proves a hello to this process (never 0): sent only in connect
  // messages to peers that were let in, never in a handle.
  uint64_t link_key() const { return link_key_; }
  // The link to `peer`'s process: the one it opened to us, else a new one
  // (non-blocking) whose hello presents `proof` (the peer's link key, or
  // the secret of the peer's listen comm being connected to); null when
  // `peer` offers none or is this process. A link left without a
  // connection (refused, or the peer unreachable) tries again here.
  std::shared_ptr<PeerLink> link_to(const PeerIdentity& peer, uint64_t proof,
                                    const std::string& name);
  // A listen comm's secret proves hellos while it is admitted (from its
  // listen until its close); admitted twice, revoked twice.
  void admit(uint64_t secret);
  void revoke(uint64_t secret);
  // Files the links other processes opened (their hellos); cheap, any thread.
  void accept_waiting();

  // Mailboxes for messages from other processes (link_messages.h).
  uint32_t open_mailbox();
  // Closes it; each message that waited there unread is answered kNoMailbox.
  void close_mailbox(uint32_t id);
  // The oldest message waiting in mailbox `id`; when none waits, pump()s
  // once and looks again.
  bool take_message(uint32_t id, LinkMessage* out);
  // Accepts links, reads the messages that arrived on any link and sends
  // what waits to be sent: one epoll_wait when nothing happened. At most
  // once per kPumpInterval (a call sooner returns at once).
  void pump();
  static constexpr std::chrono::microseconds kPumpInterval{500};

 private:
  PeerLinks(std::unique_ptr<TcpListener> listener, int timeout_ms,
            std::shared_ptr<LinkRouter> router, uint64_t link_key);
  void accept_locked();
  // Whether `proof` is the link key or an admitted secret, in a time that
  // does not depend on which (mutex_ held).
  bool proves_locked(uint64_t proof) const;

  struct Arriving {
    TcpStream stream;
    uint8_t hello[kLinkHelloSize] = {};
    std::chrono::steady_clock::time_point since;
  };

  std::unique_ptr<TcpListener> listener_;
  int timeout_ms_;
  PeerIdentity identity_;
  uint64_t link_key_;
  std::shared_ptr<LinkRouter> router_;
  std::mutex mutex_;
  std::vector<uint64_t> admitted_;  // open listen comms' secrets
  std::unordered_map<uint64_t, std::shared_ptr<PeerLink>> links_;
  std::vector<Arriving> arriving_;     // accepted, hello not read yet
  std::atomic<int64_t> next_pump_{0};  // steady_clock ticks
};

// A transport's links: opened on `socket_ifname` (WEFT_SOCKET_IFNAME) by the
// first comm that asks, held by the comms. Null when timeout_ms is 0 or
// they cannot be opened (warned once, through *refusal_said).
std::shared_ptr<PeerLinks> shared_peer_links(HeldByComms<PeerLinks>* held,
                                             const std::string& socket_ifname, int timeout_ms,
                                             bool* refusal_said);

// A comm's view of its peer's link: fails the comm once the link has been
// gone for a grace period (a completion the peer sent just before it left
// may still be on its way). Cheap enough for every progress call: the
// clock is read once every 64 calls, the link looked at every 200 ms.
class PeerWatch {
 public:
  // Nothing set: no verdict, never fails.
  void watch(std::shared_ptr<PeerLinks> links, std::shared_ptr<PeerLink> link) {
    links_ = std::move(links);
    link_ = std::move(link);
  }

  // ncclRemoteError (logged once, naming device and peer) once the peer is
  // gone; ncclSuccess otherwise.
  ncclResult_t check(const std::string& device, const std::string& peer);
  // The same without the call counter (tests, slow paths).
  ncclResult_t check_now(const std::string& device, const std::string& peer);

 private:
  std::shared_ptr<PeerLink> link_;
  std::shared_ptr<PeerLinks> links_;
  uint32_t calls_ = 0;
  std::chrono::steady_clock::time_point next_look_{};
  std::chrono::steady_clock::time_point gone_since_{};
  ConnectionFault fault_;
};

}  // namespace weft
