// A framed message channel over a stream fd (socketpair between forked
// ranks, or TCP between namespaces). Every receive is bounded by the rank's
// deadline; a closed peer is reported as such.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace weft::ft {

class Channel {
 public:
  explicit Channel(int fd = -1) : fd_(fd) {}
  ~Channel();
  Channel(const Channel&) = delete;
  Channel& operator=(const Channel&) = delete;

  int fd() const { return fd_; }
  void send_bytes(const void* p, size_t n);
  void recv_bytes(void* p, size_t n);
  void send_u64(uint64_t v) { send_bytes(&v, sizeof v); }
  uint64_t recv_u64() {
    uint64_t v;
    recv_bytes(&v, sizeof v);
    return v;
  }
  void send_str(const std::string& s);
  std::string recv_str();
  // Both sides call sync("name"): each sends the name and expects the same
  // name back, so the two ranks are at the same step.
  void sync(const std::string& name);
  // true when a message (or EOF) is waiting; does not block.
  bool readable();

 private:
  int fd_;
};

// TCP helpers for the namespace test (IPv4, blocking, deadline-bounded).
int tcp_listen(const std::string& addr, int port);
int tcp_accept(int lfd);
int tcp_connect_retry(const std::string& addr, int port);
// The socket between two rank processes: the server listens on addr:port
// and accepts one peer, the client connects to it.
int tcp_rank_socket(bool server, const std::string& addr, int port);

}  // namespace weft::ft
