#include "core/peer_links.h"

#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "core/byte_codec.h"
#include "core/random.h"
#include "weft/log.h"

namespace weft {

namespace {

constexpr uint32_t kHelloMagic = 0x4c544657;  // "WFTL"
constexpr uint8_t kHelloVersion = 1;
// Connections that never send their hello (a port scanner, a process that
// died while connecting) are dropped after this long, and never more than
// kMaxArriving wait at once.
constexpr auto kHelloTimeout = std::chrono::seconds(10);
constexpr size_t kMaxArriving = 64;
constexpr auto kLookInterval = std::chrono::milliseconds(200);
constexpr auto kGrace = std::chrono::seconds(1);

}  // namespace

void PeerIdentity::pack(uint8_t* out) const {
  put_le64(out, token);
  if (token == 0) {
    std::memset(out + 8, 0, SocketAddress::kPackedSize);
    return;
  }
  address.pack(out + 8);
}

bool PeerIdentity::unpack(const uint8_t* in, size_t size, PeerIdentity* out, std::string* error) {
  *out = PeerIdentity{};
  if (size < kPackedSize) {
    *error = "peer identity of " + std::to_string(size) + " bytes (expected " +
             std::to_string(kPackedSize) + ")";
    return false;
  }
  out->token = get_le64(in);
  if (out->token == 0) return true;
  std::string problem;
  if (!SocketAddress::unpack(in + 8, size - 8, &out->address, &problem)) {
    *error = "peer identity: " + problem;
    return false;
  }
  return true;
}

void encode_link_hello(uint64_t token, uint8_t* out) {
  std::memset(out, 0, kLinkHelloSize);
  put_le32(out, kHelloMagic);
  out[4] = kHelloVersion;
  put_le64(out + 8, token);
}

bool decode_link_hello(const uint8_t* in, uint64_t* token, std::string* error) {
  if (get_le32(in) != kHelloMagic || in[4] != kHelloVersion) {
    *error = "not a weft link hello (bad magic or version)";
    return false;
  }
  if (in[5] != 0 || in[6] != 0 || in[7] != 0) {
    *error = "link hello has non-zero reserved bytes";
    return false;
  }
  *token = get_le64(in + 8);
  if (*token == 0) {
    *error = "link hello names token 0";
    return false;
  }
  return true;
}

void PeerLink::add_connecting(TcpStream stream, uint64_t own_token) {
  std::lock_guard<std::mutex> lock(mutex_);
  Connection connection;
  connection.stream = std::move(stream);
  connection.state = Connection::State::kConnecting;
  encode_link_hello(own_token, connection.hello);
  connections_.push_back(std::move(connection));
}

void PeerLink::add_accepted(TcpStream stream) {
  std::lock_guard<std::mutex> lock(mutex_);
  Connection connection;
  connection.stream = std::move(stream);
  connections_.push_back(std::move(connection));
}

std::string PeerLink::closed_reason(const Connection& connection) const {
  uint8_t byte;
  for (;;) {
    ssize_t n = ::recv(connection.stream.fd(), &byte, 1, MSG_PEEK | MSG_DONTWAIT);
    // The peer never sends after its hello: bytes are not a close.
    if (n > 0) return "";
    if (n == 0) {
      return "its process exited or finalized weft (link to " + connection.stream.peer().text() +
             " closed)";
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return "";
    if (errno == ETIMEDOUT) {
      return "its host stopped answering for " + std::to_string(timeout_ms_ / 1000) +
             " s (host down or network cut; link to " + connection.stream.peer().text() +
             ", WEFT_PEER_TIMEOUT_MS)";
    }
    return std::string("its process died (link to ") + connection.stream.peer().text() + ": " +
           std::strerror(errno) + ")";
  }
}

std::string PeerLink::step(Connection& connection, bool* dropped) {
  *dropped = false;
  const std::string where = connection.stream.peer().text();
  if (connection.state == Connection::State::kConnecting) {
    pollfd entry{connection.stream.fd(), POLLOUT, 0};
    if (::poll(&entry, 1, 0) <= 0) return "";  // still connecting
    int error = 0;
    socklen_t length = sizeof(error);
    if (getsockopt(connection.stream.fd(), SOL_SOCKET, SO_ERROR, &error, &length) != 0) {
      error = errno;
    }
    if (error != 0) {
      // A route or firewall problem, or (refused) a firewall's reset as
      // much as a process already gone: no verdict on the peer, which a
      // healthy job must never be failed for.
      if (!unreachable_logged_) {
        unreachable_logged_ = true;
        WEFT_INFO(NCCL_NET,
                  "no liveness link to %s (%s: %s): a dead peer is noticed only through its "
                  "transport's errors",
                  name_.c_str(), where.c_str(), std::strerror(error));
      }
      *dropped = true;
      return "";
    }
    connection.state = Connection::State::kHello;
    std::string problem;
    if (!connection.stream.keep_alive(timeout_ms_, &problem)) {
      WEFT_INFO(NCCL_NET, "liveness link to %s: %s", name_.c_str(), problem.c_str());
    }
  }
  if (connection.state == Connection::State::kHello) {
    std::string problem;
    TcpStream::Progress progress =
        connection.stream.send_all(std::span<const uint8_t>(connection.hello), &problem);
    if (progress == TcpStream::Progress::Pending) return "";
    if (progress == TcpStream::Progress::Failed) {
      return "its process died (link to " + where + " failed before its hello: " + problem + ")";
    }
    connection.state = Connection::State::kUp;
  }
  return closed_reason(connection);
}

PeerLink::Health PeerLink::check(std::string* reason) {
  std::unique_lock<std::mutex> lock(mutex_, std::try_to_lock);
  if (!lock.owns_lock()) return Health::kUnknown;  // another comm is looking
  if (health_ == Health::kGone) {
    *reason = reason_;
    return health_;
  }
  health_ = Health::kUnknown;
  for (size_t i = 0; i < connections_.size();) {
    bool dropped = false;
    std::string gone = step(connections_[i], &dropped);
    if (!gone.empty()) {
      health_ = Health::kGone;
      reason_ = gone;
      *reason = reason_;
      return health_;
    }
    if (dropped) {
      connections_.erase(connections_.begin() + static_cast<long>(i));
      continue;
    }
    if (connections_[i].state == Connection::State::kUp) health_ = Health::kAlive;
    ++i;
  }
  return health_;
}

std::shared_ptr<PeerLinks> PeerLinks::open(const SocketAddress& local, int timeout_ms,
                                           std::string* error) {
  std::unique_ptr<TcpListener> listener = TcpListener::open(local, error);
  if (!listener) return nullptr;
  return std::shared_ptr<PeerLinks>(new PeerLinks(std::move(listener), timeout_ms));
}

PeerLinks::PeerLinks(std::unique_ptr<TcpListener> listener, int timeout_ms)
    : listener_(std::move(listener)), timeout_ms_(timeout_ms) {
  identity_.token = random_nonzero_u64();
  identity_.address = listener_->address();
}

std::shared_ptr<PeerLink> PeerLinks::link_to(const PeerIdentity& peer, const std::string& name) {
  if (peer.token == 0 || peer.token == identity_.token) return nullptr;
  std::lock_guard<std::mutex> lock(mutex_);
  accept_locked();
  auto found = links_.find(peer.token);
  if (found != links_.end()) return found->second;
  auto link = std::make_shared<PeerLink>(name, timeout_ms_);
  TcpStream stream;
  std::string problem;
  if (TcpStream::connect(peer.address, &stream, &problem)) {
    link->add_connecting(std::move(stream), identity_.token);
    std::string ignored;
    link->check(&ignored);  // the hello goes now where the connect is done
  } else {
    WEFT_INFO(NCCL_NET,
              "no liveness link to %s (%s): a dead peer is noticed only through its "
              "transport's errors",
              name.c_str(), problem.c_str());
  }
  links_.emplace(peer.token, link);
  return link;
}

void PeerLinks::accept_waiting() {
  std::unique_lock<std::mutex> lock(mutex_, std::try_to_lock);
  if (lock.owns_lock()) accept_locked();
}

void PeerLinks::accept_locked() {
  std::string problem;
  for (;;) {
    TcpStream stream;
    if (!listener_->accept(&stream, &problem)) {
      WEFT_INFO(NCCL_NET, "liveness listener: %s", problem.c_str());
      break;
    }
    if (!stream.valid()) break;
    if (arriving_.size() >= kMaxArriving) continue;  // dropped: closes at once
    Arriving arriving;
    arriving.stream = std::move(stream);
    arriving.since = std::chrono::steady_clock::now();
    arriving_.push_back(std::move(arriving));
  }
  const auto now = std::chrono::steady_clock::now();
  for (size_t i = 0; i < arriving_.size();) {
    Arriving& arriving = arriving_[i];
    TcpStream::Progress progress =
        arriving.stream.receive_all(std::span<uint8_t>(arriving.hello), &problem);
    uint64_t token = 0;
    bool drop = progress == TcpStream::Progress::Failed ||
                (progress == TcpStream::Progress::Pending && now - arriving.since > kHelloTimeout);
    if (progress == TcpStream::Progress::Done) {
      if (decode_link_hello(arriving.hello, &token, &problem)) {
        std::string keepalive;
        if (!arriving.stream.keep_alive(timeout_ms_, &keepalive)) {
          WEFT_INFO(NCCL_NET, "liveness link from %s: %s", arriving.stream.peer().text().c_str(),
                    keepalive.c_str());
        }
        std::shared_ptr<PeerLink>& link = links_[token];
        if (!link) link = std::make_shared<PeerLink>(arriving.stream.peer().text(), timeout_ms_);
        link->add_accepted(std::move(arriving.stream));
      } else {
        WEFT_INFO(NCCL_NET, "liveness listener: dropped a connection from %s: %s",
                  arriving.stream.peer().text().c_str(), problem.c_str());
      }
      drop = true;
    }
    if (drop) {
      arriving_.erase(arriving_.begin() + static_cast<long>(i));
    } else {
      ++i;
    }
  }
}

std::shared_ptr<PeerLinks> shared_peer_links(HeldByComms<PeerLinks>* held,
                                             const std::string& socket_ifname, int timeout_ms,
                                             bool* refusal_said) {
  if (timeout_ms == 0) return nullptr;
  auto open = [&](std::shared_ptr<PeerLinks>* out) {
    SocketAddress local;
    std::string ifname;
    std::string error;
    if (!pick_local_address(socket_ifname, AF_UNSPEC, &local, &ifname, &error) ||
        !(*out = PeerLinks::open(local, timeout_ms, &error))) {
      if (!*refusal_said) {
        *refusal_said = true;
        WEFT_WARN(
            "no liveness links (%s): a peer process that dies or a host that vanishes is "
            "noticed only through the transport's own errors, which some never report",
            error.c_str());
      }
      return ncclSystemError;
    }
    WEFT_INFO(NCCL_INIT, "liveness links on %s (%s)", (*out)->identity().address.text().c_str(),
              ifname.c_str());
    return ncclSuccess;
  };
  std::shared_ptr<PeerLinks> links;
  if (held->get([](const PeerLinks&) { return true; }, open, &links) != ncclSuccess) return nullptr;
  return links;
}

ncclResult_t PeerWatch::check(const std::string& device, const std::string& peer) {
  if (fault_.raised()) return fault_.result();
  if ((++calls_ & 63u) != 0) return ncclSuccess;
  return check_now(device, peer);
}

ncclResult_t PeerWatch::check_now(const std::string& device, const std::string& peer) {
  if (fault_.raised()) return fault_.result();
  const auto now = std::chrono::steady_clock::now();
  if (now < next_look_) return ncclSuccess;
  next_look_ = now + kLookInterval;
  if (!link_) return ncclSuccess;
  links_->accept_waiting();
  std::string reason;
  const PeerLink::Health health = link_->check(&reason);
  if (health == PeerLink::Health::kAlive) gone_since_ = {};
  if (health != PeerLink::Health::kGone) return ncclSuccess;
  if (gone_since_ == std::chrono::steady_clock::time_point{}) gone_since_ = now;
  if (now - gone_since_ < kGrace) return ncclSuccess;
  return fault_.raise(ncclRemoteError, device, peer, "the peer is gone: " + reason);
}

}  // namespace weft
