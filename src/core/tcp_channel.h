// A TCP side channel for exchanging connection information (a few hundred
// bytes each way) from NCCL's connect()/accept(), which must never block:
// every call here does what the socket allows now and reports Pending for
// the caller to come back later. Nothing raises SIGPIPE; EINTR is retried.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "core/fd.h"
#include "core/socket_address.h"

namespace weft {

// The shortest silence weft takes for a dead peer or path, whatever
// WEFT_PEER_TIMEOUT_MS says: keepalive needs whole seconds of idle and
// probes, and less would fail healthy but loaded jobs.
constexpr int kMinSilenceMs = 3000;

class TcpStream;

class TcpListener {
 public:
  // Binds to `local` (port 0: any free port), listens; non-blocking,
  // close-on-exec. Null with *error set on failure.
  static std::unique_ptr<TcpListener> open(const SocketAddress& local, std::string* error);

  // The bound address, with the port the kernel chose.
  const SocketAddress& address() const { return address_; }
  int fd() const { return fd_.get(); }

  // True with *out valid when a connection was pending, true with *out
  // invalid when none is, false (error set) on a real failure.
  bool accept(TcpStream* out, std::string* error);

 private:
  TcpListener(Fd fd, const SocketAddress& address) : fd_(std::move(fd)), address_(address) {}

  Fd fd_;
  SocketAddress address_;
};

// The refusal grace of a connect to a listener its owner says is open (a
// listen handle, a rank's address): a handle whose listener is really gone
// fails after this long, with the refusals counted.
constexpr std::chrono::milliseconds kOpenListenerRefusalGrace{2000};

// Move-only; non-blocking; TCP_NODELAY; close-on-exec.
class TcpStream {
 public:
  enum class Progress { Done, Pending, Failed };

  TcpStream() = default;
  TcpStream(TcpStream&&) = default;
  TcpStream& operator=(TcpStream&&) = default;

  // Starts a non-blocking connect; false only for immediate failures (the
  // error names the peer). With a `refusal_grace`, a refused connection is
  // tried again (after 1 ms, then twice as long each time, at most
  // kMaxRefusalPause) until the peer has refused for that long: a listener
  // that is there may still refuse one connection on a busy host (seen in
  // CI under ctest -j6: both listeners of a process that was accepting
  // refused one connector). NCCL's own sockets retry a refusal for 20 s.
  // *error_code (when given): the errno of an immediate failure.
  static bool connect(const SocketAddress& peer, TcpStream* out, std::string* error,
                      std::chrono::milliseconds refusal_grace = {}, int* error_code = nullptr);
  // Drives a connect started above: Done once connected (and on every call
  // after), Pending, or Failed ("connection refused by 10.0.0.1:4567").
  Progress finish_connect(std::string* error);
  // How many times the peer refused this connect so far.
  int refusals() const { return refusals_; }
  static constexpr std::chrono::milliseconds kMaxRefusalPause{64};

  // Send/receive exactly bytes.size() bytes across calls: each call moves
  // what the socket takes without blocking and remembers the offset. Call
  // with the same span until Done; the next call starts a new message.
  // Failed on a socket error or when the peer closed (the error says which
  // and names the peer). A send before the connect finished drives it.
  // Sending and receiving keep separate offsets, so both may be under way.
  Progress send_all(std::span<const uint8_t> bytes, std::string* error);
  Progress receive_all(std::span<uint8_t> bytes, std::string* error);

  // True when the peer has closed or the socket has an error (a
  // non-blocking peek), to notice a vanished peer later. Unread data is not
  // consumed; with data still queued this says false until it is read.
  bool peer_closed() const;

  // TCP keepalive and TCP_USER_TIMEOUT such that a peer whose kernel stops
  // answering (host down, network cut) fails the socket with ETIMEDOUT
  // after about `timeout_ms` (at least kMinSilenceMs), with no traffic in
  // between.
  bool keep_alive(int timeout_ms, std::string* error);

  bool valid() const { return fd_.valid(); }
  const SocketAddress& peer() const { return peer_; }
  int fd() const { return fd_.get(); }

 private:
  friend class TcpListener;  // hands over accepted sockets

  // One direction's partially moved message.
  struct Transfer {
    size_t size = 0;
    size_t done = 0;
    bool started = false;
  };
  // Finishes a pending connect and checks the caller passes the same size
  // until Done: Done to go ahead, else what the send/receive returns.
  Progress begin(Transfer* transfer, size_t size, const char* what, std::string* error);
  // "peer 10.0.0.1:4567 <how> after 12 of 300 bytes <moved>".
  std::string cut_short(const std::string& how, const Transfer& transfer, const char* moved) const;

  // A new socket's non-blocking connect to peer_: 0, or its errno with
  // *error worded for an operator.
  int start_connect(std::string* error);
  // ", 5 refusals in 31 ms" once a refusal was retried, else "".
  std::string refused_for(int err) const;
  // After a refusal (the socket is closed): true when the grace allows
  // another attempt, scheduled at retry_at_.
  bool may_retry_refusal();

  Fd fd_;
  SocketAddress peer_;
  bool connecting_ = false;
  std::chrono::milliseconds refusal_grace_{0};
  std::chrono::steady_clock::time_point refused_since_{};
  std::chrono::steady_clock::time_point retry_at_{};  // set: a retry waits
  int refusals_ = 0;
  Transfer sending_;
  Transfer receiving_;
};

}  // namespace weft
