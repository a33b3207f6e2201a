#include "verbs/side_channel.h"

#include <cstring>

namespace weft::verbs {

void SideChannelExchange::start_sender(const ConnectionInfo& local, Apply apply) {
  role_ = Role::Sender;
  step_ = Step::Connect;
  apply_ = std::move(apply);
  encode_connection_info(local, out_);
}

void SideChannelExchange::start_receiver(Apply apply, const uint8_t* received_info) {
  role_ = Role::Receiver;
  step_ = Step::ReceiveInfo;
  apply_ = std::move(apply);
  std::memcpy(in_, received_info, sizeof(in_));
  info_received_ = true;
}

SetupProgress SideChannelExchange::receive_info(std::string* error) {
  TcpStream::Progress progress =
      info_received_ ? TcpStream::Progress::Done : stream_->receive_all(in_, error);
  if (progress != TcpStream::Progress::Done) {
    return progress == TcpStream::Progress::Pending ? SetupProgress::Pending
                                                    : SetupProgress::Failed;
  }
  ConnectionInfo remote;
  Role expected = role_ == Role::Sender ? Role::Receiver : Role::Sender;
  std::string problem;
  if (!decode_connection_info(in_, sizeof(in_), expected, &remote, &problem)) {
    *error = "bad connection info from " + stream_->peer().text() + ": " + problem;
    return SetupProgress::Failed;
  }
  ConnectionInfo local;
  if (!apply_(remote, &local, error)) return SetupProgress::Failed;
  if (role_ == Role::Receiver) encode_connection_info(local, out_);
  return SetupProgress::Done;
}

SetupProgress SideChannelExchange::advance(TcpStream& stream, std::string* error) {
  stream_ = &stream;
  auto moved = [](TcpStream::Progress progress) {
    return progress == TcpStream::Progress::Done      ? SetupProgress::Done
           : progress == TcpStream::Progress::Pending ? SetupProgress::Pending
                                                      : SetupProgress::Failed;
  };
  for (;;) {
    SetupProgress progress = SetupProgress::Done;
    switch (step_) {
      case Step::Connect:
        progress = moved(stream.finish_connect(error));
        if (progress == SetupProgress::Done) step_ = Step::SendInfo;
        break;
      case Step::SendInfo:
        progress = moved(stream.send_all(out_, error));
        if (progress == SetupProgress::Done) {
          step_ = role_ == Role::Sender ? Step::ReceiveInfo : Step::ReceiveReady;
        }
        break;
      case Step::ReceiveInfo:
        progress = receive_info(error);
        if (progress == SetupProgress::Done) {
          step_ = role_ == Role::Sender ? Step::SendReady : Step::SendInfo;
        }
        break;
      case Step::SendReady:
        progress = moved(stream.send_all({&ready_, 1}, error));
        if (progress == SetupProgress::Done) step_ = Step::Done;
        break;
      case Step::ReceiveReady: {
        uint8_t ready = 0;
        progress = moved(stream.receive_all({&ready, 1}, error));
        if (progress == SetupProgress::Done) {
          if (ready != 1) {
            *error = "bad ready byte from " + stream.peer().text();
            return SetupProgress::Failed;
          }
          step_ = Step::Done;
        }
        break;
      }
      case Step::Done:
        return SetupProgress::Done;
    }
    if (progress != SetupProgress::Done) return progress;
  }
}

}  // namespace weft::verbs
