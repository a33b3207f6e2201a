#include "bootstrap.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "backend.h"
#include "errors.h"
#include "nccl/types.h"

namespace weft::perf {
namespace {

struct Header {
  uint32_t kind;
  uint32_t len;
};

// The largest message: the listen handles of every comm, idle ones included.
constexpr uint32_t kMaxPayload = 16u << 20;
static_assert(kMaxPayload >= (256u + kMaxIdleComms) * NCCL_NET_HANDLE_MAXSIZE);

std::string errno_text(int err) {
  return std::string(strerror(err));
}

const char* kind_name(uint32_t kind) {
  switch (static_cast<MsgKind>(kind)) {
    case MsgKind::hello:
      return "hello";
    case MsgKind::config:
      return "config";
    case MsgKind::address:
      return "address";
    case MsgKind::ready:
      return "ready";
    case MsgKind::status:
      return "status";
    case MsgKind::bye:
      return "bye";
    case MsgKind::error:
      return "error";
    case MsgKind::job:
      return "job";
  }
  return "unknown";
}

std::string sockaddr_text(const sockaddr* sa) {
  char host[INET6_ADDRSTRLEN] = "?";
  uint16_t port = 0;
  if (sa->sa_family == AF_INET) {
    auto* in = reinterpret_cast<const sockaddr_in*>(sa);
    inet_ntop(AF_INET, &in->sin_addr, host, sizeof(host));
    port = ntohs(in->sin_port);
    return std::string(host) + ":" + std::to_string(port);
  }
  if (sa->sa_family == AF_INET6) {
    auto* in6 = reinterpret_cast<const sockaddr_in6*>(sa);
    inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof(host));
    port = ntohs(in6->sin6_port);
    // Appended piecewise: GCC 12 at -O3 flags the concatenation chain with a
    // false -Wrestrict.
    std::string text = "[";
    text += host;
    text += "]:";
    text += std::to_string(port);
    return text;
  }
  return "?";
}

// Control words are tiny and latency matters for ready/status round trips.
void set_nodelay(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

}  // namespace

Listener::Listener(uint16_t port, bool loopback_only) {
  fd_ = Fd(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (fd_.get() < 0) throw PerfError("bootstrap: socket: " + errno_text(errno));
  int one = 1;
  setsockopt(fd_.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(loopback_only ? INADDR_LOOPBACK : INADDR_ANY);
  if (bind(fd_.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    throw PerfError("bootstrap: cannot bind TCP port " + std::to_string(port) + ": " +
                    errno_text(errno) + " (choose another with --port)");
  }
  if (::listen(fd_.get(), 1024) != 0) throw PerfError("bootstrap: listen: " + errno_text(errno));
  socklen_t len = sizeof(addr);
  getsockname(fd_.get(), reinterpret_cast<sockaddr*>(&addr), &len);
  port_ = ntohs(addr.sin_port);
  address_ = sockaddr_text(reinterpret_cast<sockaddr*>(&addr));
}

Bootstrap Listener::accept(int timeout_s) {
  pollfd pfd{fd_.get(), POLLIN, 0};
  int rc;
  do {
    rc = poll(&pfd, 1, timeout_s * 1000);
  } while (rc < 0 && errno == EINTR);
  if (rc == 0) {
    throw PerfError("bootstrap: no peer connected to " + address_ + " within " +
                    std::to_string(timeout_s) + " s (see --timeout)");
  }
  if (rc < 0) throw PerfError("bootstrap: poll: " + errno_text(errno));
  sockaddr_storage peer{};
  socklen_t len = sizeof(peer);
  Fd conn(::accept4(fd_.get(), reinterpret_cast<sockaddr*>(&peer), &len, SOCK_CLOEXEC));
  if (conn.get() < 0) throw PerfError("bootstrap: accept: " + errno_text(errno));
  set_nodelay(conn.get());
  return Bootstrap(std::move(conn), sockaddr_text(reinterpret_cast<sockaddr*>(&peer)));
}

Bootstrap Bootstrap::connect(const std::string& host, uint16_t port, int timeout_s) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
  std::string where = host + ":" + std::to_string(port);
  std::string last_error = "no attempt";
  for (;;) {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* res = nullptr;
    int gai = getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &res);
    if (gai != 0) {
      last_error = std::string("cannot resolve: ") + gai_strerror(gai);
    } else {
      for (addrinfo* ai = res; ai != nullptr; ai = ai->ai_next) {
        Fd fd(socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol));
        if (fd.get() < 0) continue;
        where = host + " (" + sockaddr_text(ai->ai_addr) + ")";
        if (::connect(fd.get(), ai->ai_addr, ai->ai_addrlen) == 0) {
          set_nodelay(fd.get());
          std::string peer = sockaddr_text(ai->ai_addr);
          freeaddrinfo(res);
          return Bootstrap(std::move(fd), peer);
        }
        last_error = errno_text(errno);
      }
      freeaddrinfo(res);
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      throw PerfError("bootstrap: could not connect to " + where + " within " +
                      std::to_string(timeout_s) + " s: " + last_error +
                      " (is the --server running? see --timeout)");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

void Bootstrap::write_all(const void* data, size_t len) {
  auto* p = static_cast<const char*>(data);
  while (len > 0) {
    ssize_t n = ::send(fd_.get(), p, len, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EPIPE || errno == ECONNRESET) {
        throw PeerError("peer " + peer_ + " closed the bootstrap connection (it failed or exited)");
      }
      throw PerfError("bootstrap: send to " + peer_ + ": " + errno_text(errno));
    }
    p += n;
    len -= static_cast<size_t>(n);
  }
}

void Bootstrap::set_timeout(int seconds) {
  timeout_s_ = seconds;
  timeval tv{};
  tv.tv_sec = seconds;
  setsockopt(fd_.get(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
}

void Bootstrap::read_all(void* data, size_t len) {
  auto* p = static_cast<char*>(data);
  while (len > 0) {
    ssize_t n = ::recv(fd_.get(), p, len, 0);
    if (n == 0 || (n < 0 && errno == ECONNRESET)) {
      throw PeerError("peer " + peer_ + " closed the bootstrap connection (it failed or exited)");
    }
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) {
        throw PerfError("peer " + peer_ + " did not answer within " + std::to_string(timeout_s_) +
                        " s (stuck? see --timeout)");
      }
      throw PerfError("bootstrap: recv from " + peer_ + ": " + errno_text(errno));
    }
    p += n;
    len -= static_cast<size_t>(n);
  }
}

void Bootstrap::send(MsgKind kind, const void* data, size_t len) {
  Header h{static_cast<uint32_t>(kind), static_cast<uint32_t>(len)};
  write_all(&h, sizeof(h));
  if (len > 0) write_all(data, len);
}

void Bootstrap::throw_peer_error(uint32_t len) {
  std::string text(len, '\0');
  if (len > 0) read_all(text.data(), len);
  throw PeerError("peer " + peer_ + " failed: " + text);
}

size_t Bootstrap::recv_var(MsgKind kind, void* data, size_t cap) {
  Header h{};
  read_all(&h, sizeof(h));
  if (h.len > kMaxPayload) throw PerfError("bootstrap: oversized message from " + peer_);
  if (h.kind == static_cast<uint32_t>(MsgKind::error)) throw_peer_error(h.len);
  if (h.kind != static_cast<uint32_t>(kind)) {
    throw PerfError(std::string("bootstrap: expected '") + kind_name(static_cast<uint32_t>(kind)) +
                    "' from " + peer_ + ", got '" + kind_name(h.kind) +
                    "' (do both sides run the same weft-perf?)");
  }
  if (h.len > cap) throw PerfError("bootstrap: message too long from " + peer_);
  if (h.len > 0) read_all(data, h.len);
  return h.len;
}

void Bootstrap::recv(MsgKind kind, void* data, size_t len) {
  size_t got = recv_var(kind, data, len);
  if (got != len) {
    throw PerfError(std::string("bootstrap: short '") + kind_name(static_cast<uint32_t>(kind)) +
                    "' message from " + peer_ + " (do both sides run the same weft-perf?)");
  }
}

void Bootstrap::send_error(const std::string& text) noexcept {
  try {
    if (fd_.get() >= 0) send(MsgKind::error, text.data(), text.size());
  } catch (...) {
    // The peer may be gone already; nothing more to tell it.
  }
}

void Bootstrap::check_peer() {
  pollfd pfd{fd_.get(), POLLIN, 0};
  if (poll(&pfd, 1, 0) <= 0) return;
  Header h{};
  ssize_t n = ::recv(fd_.get(), &h, sizeof(h), MSG_PEEK | MSG_DONTWAIT);
  if (n == 0 || (n < 0 && errno == ECONNRESET)) {
    throw PeerError("peer " + peer_ + " closed the bootstrap connection (it failed or exited)");
  }
  if (n == static_cast<ssize_t>(sizeof(h)) && h.kind == static_cast<uint32_t>(MsgKind::error)) {
    read_all(&h, sizeof(h));
    throw_peer_error(h.len);
  }
  // Any other message is for a later recv.
}

}  // namespace weft::perf
