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
// opens it and sends a 16-byte hello with its own token, the other files
// the accepted connection under that token and uses it too. Links are
// shared by every comm between the two processes, in both directions.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/connection_fault.h"
#include "core/held_by_comms.h"
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
// 4 version u8 (1), 5 zero u8[3], 8 token u64; little-endian.
constexpr size_t kLinkHelloSize = 16;
void encode_link_hello(uint64_t token, uint8_t* out);
bool decode_link_hello(const uint8_t* in, uint64_t* token, std::string* error);

class PeerLink {
 public:
  enum class Health : uint8_t {
    kUnknown,  // not connected (yet, or the peer is unreachable): no verdict
    kAlive,
    kGone,  // the peer's process or host is gone; reason() says how
  };

  PeerLink(std::string name, int timeout_ms) : name_(std::move(name)), timeout_ms_(timeout_ms) {}
  // An outbound link still connecting sends `hello` once connected.
  void add_connecting(TcpStream stream, uint64_t own_token);
  void add_accepted(TcpStream stream);
  // One non-blocking look at each connection (any thread; a caller that
  // finds another thread looking gets kUnknown). kGone stays.
  Health check(std::string* reason);
  const std::string& name() const { return name_; }

 private:
  struct Connection {
    TcpStream stream;
    enum class State : uint8_t { kConnecting, kHello, kUp } state = State::kUp;
    uint8_t hello[kLinkHelloSize] = {};
  };
  // Drives a connection one step; "" while it is fine, else why the peer
  // is gone. *dropped when this side could not reach the peer at all.
  std::string step(Connection& connection, bool* dropped);
  // Why the peer's end closed, or "" while it is open.
  std::string closed_reason(const Connection& connection) const;

  std::string name_;
  int timeout_ms_;
  std::mutex mutex_;
  std::vector<Connection> connections_;
  Health health_ = Health::kUnknown;
  std::string reason_;
  bool unreachable_logged_ = false;
};

class PeerLinks {
 public:
  // Listens on `local` (port 0). timeout_ms: how long a vanished host may
  // stay silent (keepalive) before its links count as gone.
  static std::shared_ptr<PeerLinks> open(const SocketAddress& local, int timeout_ms,
                                         std::string* error);

  const PeerIdentity& identity() const { return identity_; }
  // The link to `peer`'s process: the one it opened to us, else a new one
  // (non-blocking); null when `peer` offers none or is this process.
  std::shared_ptr<PeerLink> link_to(const PeerIdentity& peer, const std::string& name);
  // Files the links other processes opened (their hellos); cheap, any thread.
  void accept_waiting();

 private:
  PeerLinks(std::unique_ptr<TcpListener> listener, int timeout_ms);
  void accept_locked();

  struct Arriving {
    TcpStream stream;
    uint8_t hello[kLinkHelloSize] = {};
    std::chrono::steady_clock::time_point since;
  };

  std::unique_ptr<TcpListener> listener_;
  int timeout_ms_;
  PeerIdentity identity_;
  std::mutex mutex_;
  std::unordered_map<uint64_t, std::shared_ptr<PeerLink>> links_;
  std::vector<Arriving> arriving_;  // accepted, hello not read yet
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
