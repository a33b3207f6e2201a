// One TCP listener for every verbs listen comm of the process. A connector
// sends its connection info first, and that names the listener it wants
// (listen_id, from the handle): the hub reads it and queues the stream,
// with those bytes, for that listen comm. 10^4 listens open at once then
// cost one socket instead of 10^4. Held by the listen comms only, so it
// closes with the last of them (NCCL may unload the plugin without
// finalize).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/tcp_channel.h"
#include "verbs/wire.h"

namespace weft::verbs {

class ListenerHub {
 public:
  // A connection whose info arrived for a listen comm.
  struct Arrival {
    TcpStream stream;
    uint8_t info[kConnectionInfoSize] = {};
  };

  // Listens on `local` (port 0). A connector has connect_timeout_ms to
  // send its info. Null with *error on failure.
  static std::shared_ptr<ListenerHub> open(const SocketAddress& local, int connect_timeout_ms,
                                           std::string* error);

  const SocketAddress& address() const { return listener_->address(); }
  // Connections for `listen_id` are kept for it from now on, until remove().
  void add(uint32_t listen_id);
  // Drops (closes) what waits for it: its connectors see the connection close.
  void remove(uint32_t listen_id);
  // Accepts what waits on the socket, reads connection infos as far as
  // they have arrived, and moves up to `max` arrivals for `listen_id` to
  // *out. False with *error when the listening socket fails.
  bool take(uint32_t listen_id, size_t max, std::vector<Arrival>* out, std::string* error);

  // Connections read at once at most; later ones wait in the backlog.
  static constexpr size_t kMaxReading = 1024;
  static constexpr std::chrono::microseconds kAcceptInterval{200};

 private:
  ListenerHub(std::unique_ptr<TcpListener> listener, int connect_timeout_ms)
      : listener_(std::move(listener)), timeout_(connect_timeout_ms) {}
  struct Reading {
    Arrival arrival;
    std::chrono::steady_clock::time_point deadline;
  };
  bool accept_locked(std::string* error);
  void read_locked();
  // Files a complete info under its listener; drops it when malformed or
  // for a listener that is not open.
  void route_locked(Arrival arrival);

  std::mutex mutex_;
  std::unique_ptr<TcpListener> listener_;
  // An accept that finds nothing costs the kernel a socket made and freed:
  // after one, the next waits kAcceptInterval (accept() is polled).
  std::chrono::steady_clock::time_point next_accept_{};
  std::chrono::milliseconds timeout_;
  std::vector<Reading> reading_;
  std::unordered_map<uint32_t, std::vector<Arrival>> ready_;  // by open listen id
};

}  // namespace weft::verbs
