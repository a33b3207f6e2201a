// The connection-info exchange over the TCP side channel, as a state
// machine NCCL's non-blocking connect()/accept() drive one step per call:
//
//   sender:   connect, send its info, receive the receiver's, connect its
//             queue pairs, send a ready byte
//   receiver: receive the sender's info, create and connect its queue
//             pairs, send its info, wait for the ready byte
//
// The ready byte keeps the receiver from posting a clear-to-send before the
// sender's queue pairs can take it.
#pragma once

#include <functional>
#include <string>

#include "core/tcp_channel.h"
#include "verbs/wire.h"

namespace weft::verbs {

enum class SetupProgress { Done, Pending, Failed };

class SideChannelExchange {
 public:
  // Called once the peer's info arrived and passed the decoder: connects
  // the queue pairs; a receiver fills in its own info. False with *error.
  using Apply =
      std::function<bool(const ConnectionInfo& remote, ConnectionInfo* local, std::string* error)>;

  void start_sender(const ConnectionInfo& local, Apply apply);
  // `received_info`: the sender's info, already read from the stream (by
  // the listener hub).
  void start_receiver(Apply apply, const uint8_t* received_info);
  SetupProgress advance(TcpStream& stream, std::string* error);

 private:
  enum class Step { Connect, SendInfo, ReceiveInfo, SendReady, ReceiveReady, Done };
  SetupProgress receive_info(std::string* error);

  Role role_ = Role::Sender;
  Step step_ = Step::Connect;
  Apply apply_;
  uint8_t out_[kConnectionInfoSize] = {};
  uint8_t in_[kConnectionInfoSize] = {};
  bool info_received_ = false;  // in_ holds the peer's info already
  uint8_t ready_ = 1;
  TcpStream* stream_ = nullptr;
};

}  // namespace weft::verbs
