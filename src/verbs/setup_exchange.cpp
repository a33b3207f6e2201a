#include "verbs/setup_exchange.h"

#include <cstring>

#include "weft/log.h"

namespace weft::verbs {
namespace {

SetupProgress moved(TcpStream::Progress progress) {
  return progress == TcpStream::Progress::Done      ? SetupProgress::Done
         : progress == TcpStream::Progress::Pending ? SetupProgress::Pending
                                                    : SetupProgress::Failed;
}

const char* part_name(ExchangeCarrier::Part part) {
  return part == ExchangeCarrier::Part::kInfo ? "connection info" : "ready byte";
}

}  // namespace

SetupProgress StreamCarrier::connect(std::string* error) {
  const TcpStream::Progress progress = stream_.finish_connect(error);
  // Done comes once: the exchange then moves on to sending its info.
  if (progress == TcpStream::Progress::Done && stream_.refusals() > 0) {
    WEFT_INFO(NCCL_NET, "connected to %s after %d refused attempts", peer().c_str(),
              stream_.refusals());
  }
  return moved(progress);
}

SetupProgress StreamCarrier::send(Part, std::span<const uint8_t> bytes, std::string* error) {
  return moved(stream_.send_all(bytes, error));
}

SetupProgress StreamCarrier::receive(Part, std::span<uint8_t> bytes, std::string* error) {
  return moved(stream_.receive_all(bytes, error));
}

LinkCarrier::LinkCarrier(std::shared_ptr<PeerLinks> links, std::shared_ptr<PeerLink> link,
                         uint32_t peer_mailbox)
    : links_(std::move(links)),
      link_(std::move(link)),
      peer_mailbox_(peer_mailbox),
      own_mailbox_(links_->open_mailbox()) {}

LinkCarrier::~LinkCarrier() {
  links_->close_mailbox(own_mailbox_);
}

SetupProgress LinkCarrier::send(Part part, std::span<const uint8_t> bytes, std::string* error) {
  std::string why;
  // The info is followed by a wait for the answer, whose pumps send it
  // with others queued meanwhile; the ready byte ends the exchange.
  const PeerLink::Flush when = part == Part::kInfo ? PeerLink::Flush::kPump : PeerLink::Flush::kNow;
  if (link_->send(static_cast<uint8_t>(part), peer_mailbox_, own_mailbox_, bytes, &why, when)) {
    return SetupProgress::Done;
  }
  *error = std::string("sending the ") + part_name(part) + " to " + link_->name() + ": " + why;
  return SetupProgress::Failed;
}

SetupProgress LinkCarrier::receive(Part part, std::span<uint8_t> bytes, std::string* error) {
  LinkMessage message;
  if (!links_->take_message(own_mailbox_, &message)) {
    std::string why;
    if (link_->usable(&why)) return SetupProgress::Pending;
    *error =
        std::string("waiting for the ") + part_name(part) + " from " + link_->name() + ": " + why;
    return SetupProgress::Failed;
  }
  if (message.kind == kNoMailbox) {
    *error = link_->name() + " has no listener or comm waiting for this connection (closed, or " +
             "the handle is stale)";
    return SetupProgress::Failed;
  }
  if (message.kind != static_cast<uint8_t>(part) || message.payload.size() != bytes.size()) {
    *error = link_->name() + " sent a message of kind " + std::to_string(message.kind) + " and " +
             std::to_string(message.payload.size()) + " bytes where the " + part_name(part) +
             " (kind " + std::to_string(static_cast<int>(part)) + ", " +
             std::to_string(bytes.size()) + " bytes) was due";
    return SetupProgress::Failed;
  }
  // The info is answered (with the ready byte, or the receiver's info):
  // to where the peer's comm listens.
  if (part == Part::kInfo && message.from == 0) {
    *error = link_->name() + " sent its connection info from mailbox 0, which takes no answer";
    return SetupProgress::Failed;
  }
  std::memcpy(bytes.data(), message.payload.data(), bytes.size());
  if (message.from != 0) peer_mailbox_ = message.from;
  return SetupProgress::Done;
}

void SetupExchange::start_sender(const ConnectionInfo& local, Apply apply) {
  role_ = Role::Sender;
  step_ = Step::Connect;
  apply_ = std::move(apply);
  encode_connection_info(local, out_);
}

void SetupExchange::start_receiver(Apply apply, const uint8_t* received_info) {
  role_ = Role::Receiver;
  step_ = Step::ReceiveInfo;
  apply_ = std::move(apply);
  std::memcpy(in_, received_info, sizeof(in_));
  info_received_ = true;
}

SetupProgress SetupExchange::receive_info(ExchangeCarrier& carrier, std::string* error) {
  if (!info_received_) {
    SetupProgress progress = carrier.receive(ExchangeCarrier::Part::kInfo, in_, error);
    if (progress != SetupProgress::Done) return progress;
    info_received_ = true;
  }
  ConnectionInfo remote;
  Role expected = role_ == Role::Sender ? Role::Receiver : Role::Sender;
  std::string problem;
  if (!decode_connection_info(in_, sizeof(in_), expected, &remote, &problem)) {
    *error = "bad connection info from " + carrier.peer() + ": " + problem;
    return SetupProgress::Failed;
  }
  ConnectionInfo local;
  if (!apply_(remote, &local, error)) return SetupProgress::Failed;
  if (role_ == Role::Receiver) encode_connection_info(local, out_);
  return SetupProgress::Done;
}

SetupProgress SetupExchange::advance(ExchangeCarrier& carrier, std::string* error) {
  using Part = ExchangeCarrier::Part;
  for (;;) {
    SetupProgress progress = SetupProgress::Done;
    switch (step_) {
      case Step::Connect:
        progress = carrier.connect(error);
        if (progress == SetupProgress::Done) step_ = Step::SendInfo;
        break;
      case Step::SendInfo:
        progress = carrier.send(Part::kInfo, out_, error);
        if (progress == SetupProgress::Done) {
          step_ = role_ == Role::Sender ? Step::ReceiveInfo : Step::ReceiveReady;
        }
        break;
      case Step::ReceiveInfo:
        progress = receive_info(carrier, error);
        if (progress == SetupProgress::Done) {
          step_ = role_ == Role::Sender ? Step::SendReady : Step::SendInfo;
        }
        break;
      case Step::SendReady:
        progress = carrier.send(Part::kReady, {&ready_, 1}, error);
        if (progress == SetupProgress::Done) step_ = Step::Done;
        break;
      case Step::ReceiveReady: {
        uint8_t ready = 0;
        progress = carrier.receive(Part::kReady, {&ready, 1}, error);
        if (progress == SetupProgress::Done) {
          if (ready != 1) {
            *error = "bad ready byte from " + carrier.peer();
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
