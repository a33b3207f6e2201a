#include "core/peer_links.h"

#include <poll.h>
#include <sys/epoll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "core/byte_codec.h"
#include "core/listen_secret.h"
#include "core/random.h"
#include "weft/log.h"

namespace weft {

namespace {

constexpr uint32_t kHelloMagic = 0x4c544657;  // "WFTL"
constexpr uint8_t kHelloVersion = 3;
// Connections that never send their hello (a port scanner, a process that
// died while connecting) are dropped after this long, and never more than
// kMaxArriving wait at once: the oldest makes room for a new one, so a
// flood of silent connections cannot keep a genuine hello out.
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

void encode_link_hello(const LinkHello& hello, uint8_t* out) {
  std::memset(out, 0, kLinkHelloSize);
  put_le32(out, kHelloMagic);
  out[4] = kHelloVersion;
  put_le64(out + 8, hello.token);
  put_le64(out + 16, hello.proof);
}

bool decode_link_hello(const uint8_t* in, LinkHello* hello, std::string* error) {
  *hello = LinkHello{};
  if (get_le32(in) != kHelloMagic) {
    *error = "not a weft link hello (bad magic)";
    return false;
  }
  if (in[4] != kHelloVersion) {
    *error = "link hello of version " + std::to_string(in[4]) + ", this weft speaks " +
             std::to_string(kHelloVersion) + " (mixed weft versions across nodes?)";
    return false;
  }
  if (in[5] != 0 || in[6] != 0 || in[7] != 0) {
    *error = "link hello has non-zero reserved bytes";
    return false;
  }
  hello->token = get_le64(in + 8);
  hello->proof = get_le64(in + 16);
  if (hello->token == 0) {
    *error = "link hello names token 0";
    return false;
  }
  if (hello->proof == 0) {
    *error = "link hello proves nothing (proof 0)";
    return false;
  }
  return true;
}

// Which link each socket belongs to (one epoll set for all of them, so a
// process with thousands of peers reads only the sockets that have
// something), and the process's mailboxes. Its lock is the innermost:
// taken under PeerLinks' and a PeerLink's, never the other way round.
class LinkRouter {
 public:
  LinkRouter() : epoll_(epoll_create1(EPOLL_CLOEXEC)) {}
  bool valid() const { return epoll_.valid(); }

  void watch(int fd, std::weak_ptr<PeerLink> link) {
    std::lock_guard<std::mutex> lock(mutex_);
    epoll_event event{};
    event.events = EPOLLIN;
    event.data.fd = fd;
    if (epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, fd, &event) == 0) links_[fd] = std::move(link);
  }
  void forget(int fd) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (links_.erase(fd) != 0) epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, fd, nullptr);
  }
  // The sockets with something to read now (a null link: the listener's).
  void ready(std::vector<std::pair<int, std::shared_ptr<PeerLink>>>* out) {
    epoll_event events[64];
    std::lock_guard<std::mutex> lock(mutex_);
    int n = epoll_wait(epoll_.get(), events, 64, 0);
    for (int i = 0; i < n; ++i) {
      auto found = links_.find(events[i].data.fd);
      if (found != links_.end()) out->emplace_back(found->first, found->second.lock());
    }
  }

  Mailboxes mailboxes;

 private:
  Fd epoll_;
  std::mutex mutex_;
  std::unordered_map<int, std::weak_ptr<PeerLink>> links_;
};

PeerLink::PeerLink(std::string name, int timeout_ms, std::shared_ptr<LinkRouter> router)
    : name_(std::move(name)), timeout_ms_(timeout_ms), router_(std::move(router)) {}

PeerLink::~PeerLink() {
  if (!router_) return;
  for (const auto& connection : connections_) router_->forget(connection->stream.fd());
}

void PeerLink::add_locked(std::unique_ptr<Connection> connection) {
  if (router_ && health_ != Health::kGone)
    router_->watch(connection->stream.fd(), weak_from_this());
  connections_.push_back(std::move(connection));
  update_busy_locked();
}

void PeerLink::add_connecting(TcpStream stream, const LinkHello& hello) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto connection = std::make_unique<Connection>();
  connection->stream = std::move(stream);
  connection->state = Connection::State::kConnecting;
  encode_link_hello(hello, connection->hello);
  add_locked(std::move(connection));
}

void PeerLink::add_accepted(TcpStream stream) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto connection = std::make_unique<Connection>();
  connection->stream = std::move(stream);
  add_locked(std::move(connection));
}

void PeerLink::drop_locked(size_t index) {
  if (router_) router_->forget(connections_[index]->stream.fd());
  connections_.erase(connections_.begin() + static_cast<long>(index));
}

void PeerLink::update_busy_locked() {
  bool busy = false;
  if (health_ != Health::kGone) {
    for (const auto& connection : connections_) {
      busy = busy || connection->state != Connection::State::kUp || !connection->out.empty();
    }
  }
  busy_.store(busy, std::memory_order_release);
}

std::string PeerLink::closed_reason(const Connection& connection, int error) const {
  const std::string where = connection.stream.peer().text();
  if (error == 0) return "its process exited or finalized weft (link to " + where + " closed)";
  if (error == ETIMEDOUT) {
    return "its host stopped answering for " + std::to_string(timeout_ms_ / 1000) +
           " s (host down or network cut; link to " + where + ", WEFT_PEER_TIMEOUT_MS)";
  }
  return "its process died (link to " + where + ": " + std::strerror(error) + ")";
}

std::string PeerLink::flush(Connection& connection) {
  while (connection.out_sent < connection.out.size()) {
    ssize_t n = ::send(connection.stream.fd(), connection.out.data() + connection.out_sent,
                       connection.out.size() - connection.out_sent, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n > 0) {
      connection.out_sent += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return "";
    return closed_reason(connection, n < 0 ? errno : 0);
  }
  connection.out.clear();
  connection.out_sent = 0;
  return "";
}

namespace {

void append_message(std::vector<uint8_t>* out, uint8_t kind, uint32_t to, uint32_t from,
                    std::span<const uint8_t> payload) {
  LinkFrameHeader header;
  header.kind = kind;
  header.length = static_cast<uint16_t>(payload.size());
  header.to = to;
  header.from = from;
  const size_t at = out->size();
  out->resize(at + kLinkFrameHeaderSize + payload.size());
  encode_link_frame_header(header, out->data() + at);
  if (!payload.empty()) {
    std::memcpy(out->data() + at + kLinkFrameHeaderSize, payload.data(), payload.size());
  }
}

}  // namespace

std::string PeerLink::receive(Connection& connection) {
  uint8_t buffer[4096];
  for (;;) {
    ssize_t n = ::recv(connection.stream.fd(), buffer, sizeof(buffer), MSG_DONTWAIT);
    if (n == 0) return closed_reason(connection, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return "";
      return closed_reason(connection, errno);
    }
    std::vector<uint8_t>& in = connection.in;
    in.insert(in.end(), buffer, buffer + n);
    size_t offset = 0;
    while (in.size() - offset >= kLinkFrameHeaderSize) {
      LinkFrameHeader header;
      std::string problem;
      if (!decode_link_frame_header(in.data() + offset, &header, &problem)) {
        return "its link (" + connection.stream.peer().text() +
               ") carried what is not a weft message: " + problem +
               " (a weft of another version, or not weft)";
      }
      if (in.size() - offset - kLinkFrameHeaderSize < header.length) break;
      if (header.kind == kLinkRefused) {
        connection.refused = true;  // the close that follows is not a death
        return "";
      }
      const uint8_t* payload = in.data() + offset + kLinkFrameHeaderSize;
      LinkMessage message;
      message.link = weak_from_this();
      message.kind = header.kind;
      message.from = header.from;
      message.payload.assign(payload, payload + header.length);
      offset += kLinkFrameHeaderSize + header.length;
      if (router_ && router_->mailboxes.deliver(header.to, std::move(message))) continue;
      if (header.kind != kNoMailbox && header.from != 0) {
        uint8_t refused[4];
        put_le32(refused, header.to);
        append_message(&connection.out, kNoMailbox, header.from, 0, refused);
      }
    }
    in.erase(in.begin(), in.begin() + static_cast<long>(offset));
    if (static_cast<size_t>(n) < sizeof(buffer)) return "";
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
      unreachable_ = "no link to " + name_ + " (" + where + ": " + std::strerror(error) + ")";
      host_refused_ = error == ECONNREFUSED;
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
    host_refused_ = false;
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
  if (std::string gone = flush(connection); !gone.empty()) return gone;
  std::string gone = receive(connection);
  if (connection.refused) {
    // Not a verdict on the peer: its process is alive and said no.
    unreachable_ = "no link to " + name_ + ": its process refused the link's hello (" + where +
                   "), which presented a secret it did not hand out or no longer holds: a handle "
                   "of a listen comm it closed (a stale handle), or one it never made";
    WEFT_INFO(NCCL_NET, "%s", unreachable_.c_str());
    *dropped = true;
    return "";
  }
  return gone;
}

void PeerLink::note_refused(bool refused, const std::string& problem) {
  std::lock_guard<std::mutex> lock(mutex_);
  host_refused_ = refused;
  unreachable_ = "no link to " + name_ + " (" + problem + ")";
}

bool PeerLink::refused_by_host() {
  std::lock_guard<std::mutex> lock(mutex_);
  return host_refused_ && connections_.empty();
}

bool PeerLink::reopenable() {
  std::lock_guard<std::mutex> lock(mutex_);
  return health_ != Health::kGone && connections_.empty();
}

void PeerLink::service_locked(int fd) {
  if (health_ == Health::kGone) return;
  Health verdict = Health::kUnknown;
  for (size_t i = 0; i < connections_.size();) {
    Connection& connection = *connections_[i];
    if (fd >= 0 && connection.stream.fd() != fd) {
      if (connection.state == Connection::State::kUp) verdict = Health::kAlive;
      ++i;
      continue;
    }
    bool dropped = false;
    std::string gone = step(connection, &dropped);
    if (!gone.empty()) {
      mark_gone_locked(gone);
      return;
    }
    if (dropped) {
      drop_locked(i);
      continue;
    }
    if (connection.state == Connection::State::kUp) verdict = Health::kAlive;
    ++i;
  }
  health_ = verdict;
  update_busy_locked();
}

void PeerLink::mark_gone_locked(const std::string& reason) {
  health_ = Health::kGone;
  reason_ = reason;
  // Its sockets stay open (and readable) but are no longer watched.
  if (router_) {
    for (const auto& each : connections_) router_->forget(each->stream.fd());
  }
  busy_.store(false, std::memory_order_release);
}

void PeerLink::service(int fd) {
  std::lock_guard<std::mutex> lock(mutex_);
  service_locked(fd);
}

PeerLink::Health PeerLink::check(std::string* reason) {
  std::unique_lock<std::mutex> lock(mutex_, std::try_to_lock);
  if (!lock.owns_lock()) return Health::kUnknown;  // another comm is looking
  service_locked(-1);
  if (health_ == Health::kGone) *reason = reason_;
  return health_;
}

bool PeerLink::usable_locked(std::string* why) const {
  if (health_ == Health::kGone) {
    *why = "the peer is gone: " + reason_;
    return false;
  }
  if (connections_.empty()) {
    *why = unreachable_.empty() ? "no link to " + name_ : unreachable_;
    return false;
  }
  return true;
}

bool PeerLink::usable(std::string* why) {
  std::lock_guard<std::mutex> lock(mutex_);
  return usable_locked(why);
}

bool PeerLink::send(uint8_t kind, uint32_t to, uint32_t from, std::span<const uint8_t> payload,
                    std::string* why, Flush when) {
  if (payload.size() > kMaxLinkPayload || to == 0) {
    *why = "a link message of " + std::to_string(payload.size()) + " bytes to mailbox " +
           std::to_string(to);
    return false;
  }
  std::lock_guard<std::mutex> lock(mutex_);
  if (!usable_locked(why)) return false;
  // An open connection if there is one; else the first still connecting,
  // which sends it after its hello.
  Connection* carrier = connections_.front().get();
  for (const auto& connection : connections_) {
    if (connection->state == Connection::State::kUp) {
      carrier = connection.get();
      break;
    }
  }
  append_message(&carrier->out, kind, to, from, payload);
  if (carrier->state == Connection::State::kUp && when == Flush::kNow) {
    if (std::string gone = flush(*carrier); !gone.empty()) {
      mark_gone_locked(gone);
      *why = "the peer is gone: " + gone;
      return false;
    }
  }
  update_busy_locked();
  return true;
}

std::shared_ptr<PeerLinks> PeerLinks::open(const SocketAddress& local, int timeout_ms,
                                           std::string* error) {
  auto router = std::make_shared<LinkRouter>();
  if (!router->valid()) {
    *error = std::string("epoll_create1: ") + std::strerror(errno);
    return nullptr;
  }
  // No guessable key: without the kernel's random source, no links.
  uint64_t link_key = 0;
  if (!fresh_listen_secret(&link_key)) {
    *error = "no random bytes from the kernel for the link key";
    return nullptr;
  }
  std::unique_ptr<TcpListener> listener = TcpListener::open(local, error);
  if (!listener) return nullptr;
  router->watch(listener->fd(), std::weak_ptr<PeerLink>{});
  return std::shared_ptr<PeerLinks>(
      new PeerLinks(std::move(listener), timeout_ms, std::move(router), link_key));
}

PeerLinks::PeerLinks(std::unique_ptr<TcpListener> listener, int timeout_ms,
                     std::shared_ptr<LinkRouter> router, uint64_t link_key)
    : listener_(std::move(listener)),
      timeout_ms_(timeout_ms),
      link_key_(link_key),
      router_(std::move(router)) {
  identity_.token = random_nonzero_u64();
  identity_.address = listener_->address();
}

void PeerLinks::admit(uint64_t secret) {
  std::lock_guard<std::mutex> lock(mutex_);
  admitted_.push_back(secret);
}

void PeerLinks::revoke(uint64_t secret) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto found = std::find(admitted_.begin(), admitted_.end(), secret);
  if (found != admitted_.end()) admitted_.erase(found);
}

bool PeerLinks::proves_locked(uint64_t proof) const {
  bool proven = listen_secret_matches(link_key_, proof);
  for (uint64_t secret : admitted_) proven = listen_secret_matches(secret, proof) || proven;
  return proven;
}

std::shared_ptr<PeerLink> PeerLinks::link_to(const PeerIdentity& peer, uint64_t proof,
                                             const std::string& name) {
  if (peer.token == 0 || peer.token == identity_.token) return nullptr;
  std::lock_guard<std::mutex> lock(mutex_);
  auto found = links_.find(peer.token);
  if (found != links_.end() && !found->second->reopenable()) return found->second;
  // The peer may have opened one that waits to be filed.
  accept_locked();
  found = links_.find(peer.token);
  if (found != links_.end() && !found->second->reopenable()) return found->second;
  std::shared_ptr<PeerLink> link = found != links_.end()
                                       ? found->second
                                       : std::make_shared<PeerLink>(name, timeout_ms_, router_);
  TcpStream stream;
  std::string problem;
  if (proof == 0) {
    // Nothing to prove it with (the decoders refuse an identity without
    // a key, so only a caller's mistake): no link, as where the peer
    // cannot be reached.
    WEFT_INFO(NCCL_NET,
              "no liveness link to %s (no link key from it): a dead peer is noticed only "
              "through its transport's errors",
              name.c_str());
  } else if (int error = 0; TcpStream::connect(peer.address, &stream, &problem, {}, &error)) {
    link->add_connecting(std::move(stream), LinkHello{identity_.token, proof});
    std::string ignored;
    link->check(&ignored);  // the hello goes now where the connect is done
  } else {
    link->note_refused(error == ECONNREFUSED, problem);
    WEFT_INFO(NCCL_NET,
              "no liveness link to %s (%s): a dead peer is noticed only through its "
              "transport's errors",
              name.c_str(), problem.c_str());
  }
  links_[peer.token] = link;
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
    if (arriving_.size() >= kMaxArriving) arriving_.erase(arriving_.begin());  // the oldest
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
    LinkHello hello;
    bool drop = progress == TcpStream::Progress::Failed ||
                (progress == TcpStream::Progress::Pending && now - arriving.since > kHelloTimeout);
    if (progress == TcpStream::Progress::Done) {
      const bool decoded = decode_link_hello(arriving.hello, &hello, &problem);
      if (decoded && !proves_locked(hello.proof)) {
        // Told no (nothing it did not know: it reached a weft process's
        // link port), then closed: no link is filed, nothing it sends is
        // read.
        uint8_t refusal[kLinkFrameHeaderSize];
        LinkFrameHeader header;
        header.kind = kLinkRefused;
        header.to = kAnyMailbox;
        encode_link_frame_header(header, refusal);
        (void)::send(arriving.stream.fd(), refusal, sizeof(refusal), MSG_DONTWAIT | MSG_NOSIGNAL);
        log_refused_connect("liveness listener " + identity_.address.text(),
                            arriving.stream.peer().text(),
                            "its link hello proved no secret this process handed out: a stale "
                            "handle, or someone who was never handed one");
      } else if (decoded) {
        std::string keepalive;
        if (!arriving.stream.keep_alive(timeout_ms_, &keepalive)) {
          WEFT_INFO(NCCL_NET, "liveness link from %s: %s", arriving.stream.peer().text().c_str(),
                    keepalive.c_str());
        }
        std::shared_ptr<PeerLink>& link = links_[hello.token];
        if (!link) {
          link = std::make_shared<PeerLink>(arriving.stream.peer().text(), timeout_ms_, router_);
        }
        link->add_accepted(std::move(arriving.stream));
      } else {
        log_refused_connect("liveness listener " + identity_.address.text(),
                            arriving.stream.peer().text(), "its link hello: " + problem);
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

uint32_t PeerLinks::open_mailbox() {
  return router_->mailboxes.open();
}

void PeerLinks::close_mailbox(uint32_t id) {
  for (LinkMessage& message : router_->mailboxes.close(id)) {
    std::shared_ptr<PeerLink> link = message.link.lock();
    if (!link || message.kind == kNoMailbox || message.from == 0) continue;
    uint8_t refused[4];
    put_le32(refused, id);
    std::string ignored;
    link->send(kNoMailbox, message.from, 0, refused, &ignored);
  }
}

bool PeerLinks::take_message(uint32_t id, LinkMessage* out) {
  // A pump for another mailbox may have brought it already.
  if (router_->mailboxes.take(id, out)) return true;
  pump();
  return router_->mailboxes.take(id, out);
}

void PeerLinks::pump() {
  // Called by every connect() and accept() of a comm being set up:
  // messages queued meanwhile (Flush::kPump) go in one send, and a burst
  // of thousands of comms costs a few epoll_waits per millisecond.
  const int64_t now = std::chrono::steady_clock::now().time_since_epoch().count();
  int64_t due = next_pump_.load(std::memory_order_relaxed);
  if (now < due ||
      !next_pump_.compare_exchange_strong(
          due,
          now + std::chrono::duration_cast<std::chrono::steady_clock::duration>(kPumpInterval)
                    .count(),
          std::memory_order_relaxed)) {
    return;
  }
  std::vector<std::pair<int, std::shared_ptr<PeerLink>>> ready;
  router_->ready(&ready);
  bool listener_ready = false;
  for (auto& [fd, link] : ready) {
    if (link) {
      link->service(fd);
    } else if (fd == listener_->fd()) {
      listener_ready = true;
    }
  }
  std::vector<std::shared_ptr<PeerLink>> busy;
  {
    std::unique_lock<std::mutex> lock(mutex_, std::try_to_lock);
    if (!lock.owns_lock()) return;  // another thread pumps
    if (listener_ready || !arriving_.empty()) accept_locked();
    for (const auto& [token, link] : links_) {
      if (link->busy()) busy.push_back(link);
    }
  }
  for (const auto& link : busy) link->service(-1);
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

void ListenerWatch::watch(std::shared_ptr<PeerLinks> links, const PeerIdentity& listener,
                          uint64_t secret, std::string name) {
  if (!links || listener.token == 0) return;
  links_ = std::move(links);
  listener_ = listener;
  secret_ = secret;
  name_ = std::move(name);
}

ncclResult_t ListenerWatch::check(const std::string& device, const std::string& peer) {
  if (fault_.raised()) return fault_.result();
  if (!links_) return ncclSuccess;
  const auto now = std::chrono::steady_clock::now();
  if (now < next_look_) return ncclSuccess;
  next_look_ = now + kLookInterval;
  links_->accept_waiting();
  // Opens the link, or tries again where the last try was refused.
  const std::shared_ptr<PeerLink> link = links_->link_to(listener_, secret_, name_);
  if (!link) return ncclSuccess;
  std::string reason;
  if (link->check(&reason) == PeerLink::Health::kGone) {
    return fault_.raise(ncclRemoteError, device, peer,
                        "the listening process is gone before it accepted: " + reason);
  }
  if (!link->refused_by_host()) {
    refused_since_ = {};
    return ncclSuccess;
  }
  if (refused_since_ == std::chrono::steady_clock::time_point{}) refused_since_ = now;
  if (now - refused_since_ < kRefusedFor) return ncclSuccess;
  return fault_.raise(ncclRemoteError, device, peer,
                      "the listening process is gone: its host has refused its liveness link (" +
                          listener_.address.text() + ") for " +
                          std::to_string(kRefusedFor.count()) +
                          " s and the connect request is unanswered (a firewall that resets that "
                          "port: set WEFT_PEER_TIMEOUT_MS=0 to go without liveness links)");
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
