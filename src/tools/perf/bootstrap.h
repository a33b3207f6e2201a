// Bootstrap: a TCP connection between the two ranks that carries listen
// handles / endpoint names and a few control words. Messages are framed as
// {kind, length, payload}; an Error message carries the peer's failure text.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "core/fd.h"

namespace weft::perf {

enum class MsgKind : uint32_t {
  hello = 1,    // magic, protocol version, backend kind (plugin or raw)
  config = 2,   // rank 0's test parameters
  address = 3,  // listen handle (plugin) or endpoint name (raw)
  ready = 4,    // receiver has posted its receives
  status = 5,   // per-size verification result
  bye = 6,
  error = 7,  // text: why the peer gives up
  job = 8,    // a job's ranks (job_bootstrap.h): lengths and payloads
};

class Bootstrap;

// A listening socket; bound before fork in --local mode so the child can
// connect at once.
class Listener {
 public:
  // loopback_only: bind 127.0.0.1, else all addresses. port 0: ephemeral.
  Listener(uint16_t port, bool loopback_only);
  uint16_t port() const { return port_; }
  std::string address() const { return address_; }
  // Waits up to timeout_s for one peer.
  Bootstrap accept(int timeout_s);
  void close() { fd_.reset(); }

 private:
  Fd fd_;
  uint16_t port_ = 0;
  std::string address_;
};

class Bootstrap {
 public:
  explicit Bootstrap(Fd fd, std::string peer) : fd_(std::move(fd)), peer_(std::move(peer)) {}
  // Retries until the server answers or timeout_s passes.
  static Bootstrap connect(const std::string& host, uint16_t port, int timeout_s);

  const std::string& peer() const { return peer_; }

  // A peer that is alive but never answers (stuck in a plugin call) fails
  // the blocking receives after this long instead of hanging the run.
  void set_timeout(int seconds);

  void send(MsgKind kind, const void* data, size_t len);
  // Receives a message of `kind` and exactly `len` bytes. Throws PeerError
  // on EOF or an error message from the peer, PerfError on anything else.
  void recv(MsgKind kind, void* data, size_t len);
  // As recv, for a payload of at most `cap` bytes; returns its length.
  size_t recv_var(MsgKind kind, void* data, size_t cap);

  template <class T>
  void send_pod(MsgKind kind, const T& v) {
    send(kind, &v, sizeof(v));
  }
  template <class T>
  T recv_pod(MsgKind kind) {
    T v;
    recv(kind, &v, sizeof(v));
    return v;
  }

  // Best effort: tell the peer why we stop. Never throws.
  void send_error(const std::string& text) noexcept;

  // Non-blocking: throws PeerError if the peer closed the connection or sent
  // an error; leaves any other pending message in place.
  void check_peer();

 private:
  void write_all(const void* data, size_t len);
  void read_all(void* data, size_t len);
  [[noreturn]] void throw_peer_error(uint32_t len);

  Fd fd_;
  std::string peer_;
  int timeout_s_ = 0;
};

}  // namespace weft::perf
