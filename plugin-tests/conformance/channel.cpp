#include "channel.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

#include "check.h"

namespace weft::ft {

Channel::~Channel() {
  if (fd_ >= 0) ::close(fd_);
}

void Channel::send_bytes(const void* p, size_t n) {
  const char* c = static_cast<const char*>(p);
  while (n) {
    ssize_t w = ::send(fd_, c, n, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) continue;
    FT_REQUIRE(w > 0, "channel send failed: " << std::strerror(errno) << " (peer gone?)");
    c += w;
    n -= static_cast<size_t>(w);
  }
}

void Channel::recv_bytes(void* p, size_t n) {
  char* c = static_cast<char*>(p);
  while (n) {
    pollfd pfd{fd_, POLLIN, 0};
    int r = ::poll(&pfd, 1, 200);
    if (r == 0 || (r < 0 && errno == EINTR)) {
      FT_DEADLINE("waiting for a message from the peer rank");
      continue;
    }
    FT_REQUIRE(r > 0, "poll: " << std::strerror(errno));
    ssize_t got = ::recv(fd_, c, n, 0);
    if (got < 0 && errno == EINTR) continue;
    FT_REQUIRE(got != 0, "peer closed the channel (the peer rank failed or exited early)");
    FT_REQUIRE(got > 0, "channel recv failed: " << std::strerror(errno));
    c += got;
    n -= static_cast<size_t>(got);
  }
}

void Channel::send_str(const std::string& s) {
  send_u64(s.size());
  send_bytes(s.data(), s.size());
}

std::string Channel::recv_str() {
  uint64_t n = recv_u64();
  FT_REQUIRE(n < (1u << 20), "bad frame length " << n);
  std::string s(n, '\0');
  recv_bytes(s.data(), n);
  return s;
}

void Channel::sync(const std::string& name) {
  send_str(name);
  std::string got = recv_str();
  FT_REQUIRE(got == name,
             "ranks out of step: waiting at '" << name << "', peer at '" << got << "'");
}

bool Channel::readable() {
  pollfd pfd{fd_, POLLIN, 0};
  return ::poll(&pfd, 1, 0) > 0;
}

int tcp_listen(const std::string& addr, int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  FT_REQUIRE(fd >= 0, "socket: " << std::strerror(errno));
  int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(static_cast<uint16_t>(port));
  FT_REQUIRE(::inet_pton(AF_INET, addr.c_str(), &sa.sin_addr) == 1, "bad address " << addr);
  FT_REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0,
             "bind " << addr << ":" << port << ": " << std::strerror(errno));
  FT_REQUIRE(::listen(fd, 4) == 0, "listen: " << std::strerror(errno));
  return fd;
}

int tcp_accept(int lfd) {
  for (;;) {
    pollfd pfd{lfd, POLLIN, 0};
    int r = ::poll(&pfd, 1, 200);
    if (r <= 0) {
      FT_DEADLINE("waiting for the peer's TCP bootstrap connection");
      continue;
    }
    int fd = ::accept(lfd, nullptr, nullptr);
    if (fd < 0 && errno == EINTR) continue;
    FT_REQUIRE(fd >= 0, "accept: " << std::strerror(errno));
    return fd;
  }
}

int tcp_connect_retry(const std::string& addr, int port) {
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(static_cast<uint16_t>(port));
  FT_REQUIRE(::inet_pton(AF_INET, addr.c_str(), &sa.sin_addr) == 1, "bad address " << addr);
  for (;;) {
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    FT_REQUIRE(fd >= 0, "socket: " << std::strerror(errno));
    if (::connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0) return fd;
    int e = errno;
    ::close(fd);
    FT_DEADLINE("connecting the TCP bootstrap to " + addr + ":" + std::to_string(port) + " (" +
                std::strerror(e) + ")");
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

int tcp_rank_socket(bool server, const std::string& addr, int port) {
  if (!server) return tcp_connect_retry(addr, port);
  int lfd = tcp_listen(addr, port);
  int fd = tcp_accept(lfd);
  ::close(lfd);
  return fd;
}

}  // namespace weft::ft
