// How two ranks of a one-sided comm over verbs meet: on the first operation
// either addresses to the other (windows on demand, core/symmetric_comm.h),
// never at connect. The caller opens a TCP connection to the other's
// listener (its address is the listen handle's payload) and sends a hello
// (proving it is the rank it names, core/rma_record.h) with its queue
// pair's address (verbs/wire.h, role OneSided); the other brings its queue
// pair up and answers in kind; the caller brings its own up and says a
// second hello, after which both may write. When both call at once, the
// lower rank's call is the one kept. The connection then carries the asks
// for windows and their answers, 56-byte records, both ways.
//
// All of it runs in the comm's progress, without blocking: sockets are
// looked at on every call while a meeting or a record is under way, else
// once a millisecond (a clock read per call, no system call).
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "core/fd.h"
#include "core/rma_record.h"
#include "core/socket_address.h"
#include "core/tcp_channel.h"
#include "verbs/wire.h"

namespace weft::verbs {

class VerbsRmaComm;

class RmaPeerLinks {
 public:
  // A hello and a queue pair's address.
  static constexpr size_t kIntroductionSize = kRmaRecordSize + kConnectionInfoSize;

  // A meeting not done within `meet_ms` fails, naming the rank.
  RmaPeerLinks(VerbsRmaComm& comm, std::unique_ptr<TcpListener> listener,
               std::vector<SocketAddress> addresses, int meet_ms);
  // False with *error when the sockets cannot be watched.
  bool open(std::string* error);
  // Sends `record` to `rank` from the next service, meeting it first if
  // need be. Any thread; never blocks.
  void send(uint32_t rank, const RmaRecord& record);
  // Moves what the sockets allow, from one thread at a time (another
  // caller goes on at once).
  void service();

 private:
  enum class State : uint8_t {
    Idle,        // never met
    Calling,     // this rank called: its introduction goes out
    Awaiting,    // its introduction went; the answer is due
    Confirming,  // the answer came, queue pair up: the second hello goes out
    Answering,   // it called: this rank's answer goes out
    Welcoming,   // the answer went; the caller's second hello is due
    Ready,
    Waiting,  // the lower rank refused this rank's call: it is calling
    Failed,
  };
  struct Link {
    State state = State::Idle;
    TcpStream stream;
    std::array<uint8_t, kIntroductionSize> out{};
    std::array<uint8_t, kIntroductionSize> in{};
    std::array<uint8_t, kRmaRecordSize> record_out{};
    bool record_sending = false;
    std::array<uint8_t, kRmaRecordSize> record_in{};
    std::deque<RmaRecord> outbox;
    std::string why;      // Failed
    bool listed = false;  // in active_
    // A meeting not done by then fails (a peer that took the connection
    // and went silent).
    std::chrono::steady_clock::time_point meet_by{};
  };
  // A connection accepted whose hello has not said who it is yet: anyone
  // may connect, so at most kMaxNewcomers wait, each for kNewcomerPatience,
  // and they are read only on the once-a-millisecond look.
  struct Newcomer {
    TcpStream stream;
    std::array<uint8_t, kIntroductionSize> in{};
    std::chrono::steady_clock::time_point until{};
  };
  static constexpr size_t kMaxNewcomers = 64;
  static constexpr std::chrono::seconds kNewcomerPatience{10};

  void call(uint32_t rank);
  // Moves link `rank` on as far as its socket allows.
  void drive(uint32_t rank);
  // Reads and hands over the records that arrived on a ready link.
  void read_records(uint32_t rank);
  // False once the newcomer is dealt with (kept as a link, or dropped).
  bool welcome(Newcomer& newcomer, std::chrono::steady_clock::time_point now);
  // This rank's hello and queue pair address for `rank` into link.out.
  bool introduce(uint32_t rank, std::string* error);
  // Checks the introduction in link.in (or the newcomer's) came from `rank`
  // and brings the queue pair up against it.
  bool accept_introduction(uint32_t rank, const uint8_t* bytes, std::string* error);
  void fail(uint32_t rank, const std::string& why);
  void become_ready(uint32_t rank);
  // Puts `rank` in active_ unless it is there.
  void activate(uint32_t rank);
  bool meeting(State state) const {
    return state == State::Calling || state == State::Awaiting || state == State::Confirming ||
           state == State::Answering || state == State::Welcoming;
  }

  VerbsRmaComm& comm_;
  std::unique_ptr<TcpListener> listener_;
  std::vector<SocketAddress> addresses_;
  std::vector<Link> links_;
  std::vector<Newcomer> newcomers_;
  std::chrono::milliseconds meet_timeout_;
  // Links meeting or with records to send: looked at on every service.
  std::vector<uint32_t> active_;
  // Ready links and the listener, watched for what arrives (the listener's
  // key is the rank count).
  Fd epoll_;
  std::chrono::steady_clock::time_point next_look_{};
  // Read before the lock: whether the next service must look now (links
  // under way, or records submitted), and when it must anyway.
  std::atomic<bool> under_way_{false};
  std::atomic<int64_t> next_look_ns_{0};
  std::mutex service_mutex_;
  // Records handed over by send(), for the next service.
  std::mutex submit_mutex_;
  std::vector<std::pair<uint32_t, RmaRecord>> submitted_;
  std::atomic<bool> submissions_{false};
};

}  // namespace weft::verbs
