#include "core/tcp_channel.h"

#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace weft {

namespace {

std::string errno_text(int err) {
  char buffer[128];
  return strerror_r(err, buffer, sizeof(buffer));  // GNU: returns the text
}

bool set_nodelay(int fd) {
  int one = 1;
  return setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) == 0;
}

// The failure of a connect to `peer`, worded for an operator.
std::string connect_error(int err, const SocketAddress& peer) {
  switch (err) {
    case ECONNREFUSED:
      return "connection refused by " + peer.text() + " (nothing listens there any more)";
    case ETIMEDOUT:
      return "connection to " + peer.text() + " timed out";
    case ENETUNREACH:
    case EHOSTUNREACH:
      return "no route to " + peer.text() + ": " + errno_text(err);
    default:
      return "connect to " + peer.text() + ": " + errno_text(err);
  }
}

}  // namespace

std::unique_ptr<TcpListener> TcpListener::open(const SocketAddress& local, std::string* error) {
  Fd fd(socket(local.family(), SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!fd) {
    *error = "listen on " + local.text() + ": socket: " + errno_text(errno);
    return nullptr;
  }
  // A restarted job may reuse a port whose old connections sit in TIME_WAIT.
  int one = 1;
  setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (bind(fd.get(), reinterpret_cast<const sockaddr*>(&local.storage), local.length) != 0) {
    *error = "listen on " + local.text() + ": bind: " + errno_text(errno);
    return nullptr;
  }
  if (listen(fd.get(), SOMAXCONN) != 0) {
    *error = "listen on " + local.text() + ": " + errno_text(errno);
    return nullptr;
  }
  SocketAddress bound;
  bound.length = sizeof(bound.storage);
  if (getsockname(fd.get(), reinterpret_cast<sockaddr*>(&bound.storage), &bound.length) != 0) {
    *error = "listen on " + local.text() + ": getsockname: " + errno_text(errno);
    return nullptr;
  }
  return std::unique_ptr<TcpListener>(new TcpListener(std::move(fd), bound));
}

bool TcpListener::accept(TcpStream* out, std::string* error) {
  *out = TcpStream();
  while (true) {
    SocketAddress peer;
    peer.length = sizeof(peer.storage);
    Fd fd(accept4(fd_.get(), reinterpret_cast<sockaddr*>(&peer.storage), &peer.length,
                  SOCK_NONBLOCK | SOCK_CLOEXEC));
    if (!fd) {
      // ECONNABORTED: a peer that gave up while queued; look for the next.
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return true;
      *error = "accept on " + address_.text() + ": " + errno_text(errno);
      return false;
    }
    if (!set_nodelay(fd.get())) {
      *error = "accept from " + peer.text() + ": TCP_NODELAY: " + errno_text(errno);
      return false;
    }
    out->fd_ = std::move(fd);
    out->peer_ = peer;
    return true;
  }
}

bool TcpStream::connect(const SocketAddress& peer, TcpStream* out, std::string* error,
                        std::chrono::milliseconds refusal_grace, int* error_code) {
  *out = TcpStream();
  out->peer_ = peer;
  out->refusal_grace_ = refusal_grace;
  const int err = out->start_connect(error);
  // Refused at once (connect() saw the reset): retried as a late refusal is.
  if (err == 0 || (err == ECONNREFUSED && out->may_retry_refusal())) return true;
  *out = TcpStream();
  if (error_code != nullptr) *error_code = err;
  return false;
}

int TcpStream::start_connect(std::string* error) {
  connecting_ = false;
  Fd fd(socket(peer_.family(), SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!fd) {
    const int err = errno;
    *error = "connect to " + peer_.text() + ": socket: " + errno_text(err);
    return err;
  }
  if (!set_nodelay(fd.get())) {
    const int err = errno;
    *error = "connect to " + peer_.text() + ": TCP_NODELAY: " + errno_text(err);
    return err;
  }
  if (::connect(fd.get(), reinterpret_cast<const sockaddr*>(&peer_.storage), peer_.length) != 0) {
    // An interrupted connect goes on in the background, as EINPROGRESS does.
    if (errno != EINPROGRESS && errno != EINTR) {
      const int err = errno;
      *error = connect_error(err, peer_);
      return err;
    }
    connecting_ = true;
  }
  fd_ = std::move(fd);
  return 0;
}

bool TcpStream::may_retry_refusal() {
  fd_.reset();
  connecting_ = false;
  if (refusal_grace_.count() <= 0) return false;
  const auto now = std::chrono::steady_clock::now();
  if (refusals_++ == 0) refused_since_ = now;
  if (now - refused_since_ >= refusal_grace_) return false;
  const int doublings = std::min(refusals_ - 1, 6);  // 1 ms .. kMaxRefusalPause
  retry_at_ = now + std::min(kMaxRefusalPause, std::chrono::milliseconds(1 << doublings));
  return true;
}

TcpStream::Progress TcpStream::finish_connect(std::string* error) {
  if (retry_at_ != std::chrono::steady_clock::time_point{}) {
    if (std::chrono::steady_clock::now() < retry_at_) return Progress::Pending;
    retry_at_ = {};
    const int err = start_connect(error);
    if (err == ECONNREFUSED && may_retry_refusal()) return Progress::Pending;
    if (err != 0) {
      *error += refused_for(err);
      return Progress::Failed;
    }
  }
  if (!fd_) {
    *error = "connect to " + peer_.text() + ": no socket (connect() failed or was not called)";
    return Progress::Failed;
  }
  if (!connecting_) return Progress::Done;
  pollfd entry{fd_.get(), POLLOUT, 0};
  int ready;
  do {
    ready = poll(&entry, 1, 0);
  } while (ready < 0 && errno == EINTR);
  if (ready < 0) {
    *error = "connect to " + peer_.text() + ": poll: " + errno_text(errno);
    return Progress::Failed;
  }
  if (ready == 0) return Progress::Pending;
  int err = 0;
  socklen_t length = sizeof(err);
  if (getsockopt(fd_.get(), SOL_SOCKET, SO_ERROR, &err, &length) != 0) err = errno;
  if (err != 0) {
    if (err == ECONNREFUSED && may_retry_refusal()) return Progress::Pending;
    *error = connect_error(err, peer_) + refused_for(err);
    fd_.reset();
    return Progress::Failed;
  }
  connecting_ = false;
  return Progress::Done;
}

std::string TcpStream::refused_for(int err) const {
  if (err != ECONNREFUSED || refusals_ <= 1) return "";
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                      std::chrono::steady_clock::now() - refused_since_)
                      .count();
  return ", " + std::to_string(refusals_) + " refusals in " + std::to_string(ms) + " ms";
}

TcpStream::Progress TcpStream::begin(Transfer* transfer, size_t size, const char* what,
                                     std::string* error) {
  if (connecting_ || !fd_) {
    Progress connected = finish_connect(error);
    if (connected != Progress::Done) return connected;
  }
  if (!transfer->started) {
    *transfer = Transfer{size, 0, true};
    return Progress::Done;
  }
  if (transfer->size == size) return Progress::Done;
  *error = std::string(what) + " " + peer_.text() + ": called with " + std::to_string(size) +
           " bytes while a " + std::to_string(transfer->size) + "-byte message is " +
           std::to_string(transfer->done) + " bytes in";
  *transfer = Transfer{};
  return Progress::Failed;
}

std::string TcpStream::cut_short(const std::string& how, const Transfer& transfer,
                                 const char* moved) const {
  return "peer " + peer_.text() + " " + how + " after " + std::to_string(transfer.done) + " of " +
         std::to_string(transfer.size) + " bytes " + moved;
}

TcpStream::Progress TcpStream::send_all(std::span<const uint8_t> bytes, std::string* error) {
  Progress ready = begin(&sending_, bytes.size(), "send to", error);
  if (ready != Progress::Done) return ready;
  while (sending_.done < bytes.size()) {
    ssize_t n = ::send(fd_.get(), bytes.data() + sending_.done, bytes.size() - sending_.done,
                       MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      sending_.done += static_cast<size_t>(n);
      continue;
    }
    if (n == 0) return Progress::Pending;  // TCP does not do this; never spin on it
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return Progress::Pending;
    if (errno == EPIPE || errno == ECONNRESET) {
      *error = cut_short("closed the connection (" + errno_text(errno) + ")", sending_, "sent");
    } else {
      *error = "send to " + peer_.text() + ": " + errno_text(errno);
    }
    sending_ = Transfer{};
    return Progress::Failed;
  }
  sending_ = Transfer{};
  return Progress::Done;
}

TcpStream::Progress TcpStream::receive_all(std::span<uint8_t> bytes, std::string* error) {
  Progress ready = begin(&receiving_, bytes.size(), "receive from", error);
  if (ready != Progress::Done) return ready;
  while (receiving_.done < bytes.size()) {
    ssize_t n = ::recv(fd_.get(), bytes.data() + receiving_.done, bytes.size() - receiving_.done,
                       MSG_DONTWAIT);
    if (n > 0) {
      receiving_.done += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return Progress::Pending;
    if (n == 0) {
      *error = cut_short("closed the connection", receiving_, "received");
    } else if (errno == ECONNRESET) {
      *error = cut_short("reset the connection", receiving_, "received");
    } else {
      *error = "receive from " + peer_.text() + ": " + errno_text(errno);
    }
    receiving_ = Transfer{};
    return Progress::Failed;
  }
  receiving_ = Transfer{};
  return Progress::Done;
}

bool TcpStream::keep_alive(int timeout_ms, std::string* error) {
  // Idle a third of the time, then three probes over the rest.
  const int seconds = std::max(timeout_ms, kMinSilenceMs) / 1000;
  const int idle = std::max(seconds / 3, 1);
  const int interval = std::max((seconds - idle) / 3, 1);
  const int probes = 3;
  const unsigned user_timeout = static_cast<unsigned>(seconds) * 1000u;
  const int on = 1;
  if (setsockopt(fd_.get(), SOL_SOCKET, SO_KEEPALIVE, &on, sizeof(on)) != 0 ||
      setsockopt(fd_.get(), IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle)) != 0 ||
      setsockopt(fd_.get(), IPPROTO_TCP, TCP_KEEPINTVL, &interval, sizeof(interval)) != 0 ||
      setsockopt(fd_.get(), IPPROTO_TCP, TCP_KEEPCNT, &probes, sizeof(probes)) != 0 ||
      setsockopt(fd_.get(), IPPROTO_TCP, TCP_USER_TIMEOUT, &user_timeout, sizeof(user_timeout)) !=
          0) {
    *error = "keepalive on the connection with " + peer_.text() + ": " + errno_text(errno);
    return false;
  }
  return true;
}

bool TcpStream::peer_closed() const {
  if (!fd_) return true;
  if (connecting_) {
    // poll, not SO_ERROR: reading SO_ERROR would clear what finish_connect reports.
    pollfd entry{fd_.get(), POLLOUT, 0};
    while (poll(&entry, 1, 0) < 0) {
      if (errno != EINTR) return true;
    }
    return (entry.revents & (POLLERR | POLLHUP)) != 0;
  }
  uint8_t byte;
  while (true) {
    ssize_t n = ::recv(fd_.get(), &byte, 1, MSG_PEEK | MSG_DONTWAIT);
    if (n > 0) return false;
    if (n == 0) return true;
    if (errno == EINTR) continue;
    return errno != EAGAIN && errno != EWOULDBLOCK;
  }
}

}  // namespace weft
