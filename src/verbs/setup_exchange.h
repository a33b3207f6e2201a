// The connection-info exchange, as a state machine NCCL's non-blocking
// connect()/accept() drive one step per call:
//
//   sender:   send its info, receive the receiver's, connect its queue
//             pairs, send a ready byte
//   receiver: receive the sender's info, create and connect its queue
//             pairs, send its info, wait for the ready byte
//
// The ready byte keeps the receiver from posting a clear-to-send before the
// sender's queue pairs can take it.
//
// What carries it: the liveness link to the peer's process (one TCP
// connection per pair of processes, shared by all their comms: messages
// between mailboxes, core/link_messages.h), or, where either process has
// no links, a TCP connection of the comm's own to the listener hub.
#pragma once

#include <functional>
#include <memory>
#include <span>
#include <string>

#include "core/peer_links.h"
#include "core/tcp_channel.h"
#include "verbs/wire.h"

namespace weft::verbs {

enum class SetupProgress { Done, Pending, Failed };

// One step of moving bytes to or from the peer.
class ExchangeCarrier {
 public:
  // The messages, by their kind on a link.
  enum class Part : uint8_t { kInfo = 1, kReady = 2 };

  virtual ~ExchangeCarrier() = default;
  virtual SetupProgress connect(std::string* error) = 0;
  virtual SetupProgress send(Part part, std::span<const uint8_t> bytes, std::string* error) = 0;
  // Exactly bytes.size() bytes of `part`.
  virtual SetupProgress receive(Part part, std::span<uint8_t> bytes, std::string* error) = 0;
  // The peer, for messages.
  virtual std::string peer() const = 0;
};

// The comm's own TCP connection (`stream` outlives the carrier).
class StreamCarrier final : public ExchangeCarrier {
 public:
  explicit StreamCarrier(TcpStream& stream) : stream_(stream) {}
  SetupProgress connect(std::string* error) override;
  SetupProgress send(Part part, std::span<const uint8_t> bytes, std::string* error) override;
  SetupProgress receive(Part part, std::span<uint8_t> bytes, std::string* error) override;
  std::string peer() const override { return stream_.peer().text(); }

 private:
  TcpStream& stream_;
};

// Messages on the link to the peer's process: each to the mailbox the
// peer named last (first `peer_mailbox`: a sender's is the listener's,
// from its handle), from one of this comm's own, closed with the carrier.
class LinkCarrier final : public ExchangeCarrier {
 public:
  LinkCarrier(std::shared_ptr<PeerLinks> links, std::shared_ptr<PeerLink> link,
              uint32_t peer_mailbox);
  ~LinkCarrier() override;
  SetupProgress connect(std::string*) override { return SetupProgress::Done; }
  SetupProgress send(Part part, std::span<const uint8_t> bytes, std::string* error) override;
  SetupProgress receive(Part part, std::span<uint8_t> bytes, std::string* error) override;
  std::string peer() const override { return link_->name(); }

 private:
  std::shared_ptr<PeerLinks> links_;
  std::shared_ptr<PeerLink> link_;
  uint32_t peer_mailbox_;
  uint32_t own_mailbox_;
};

class SetupExchange {
 public:
  // Called once the peer's info arrived and passed the decoder: connects
  // the queue pairs; a receiver fills in its own info. False with *error.
  using Apply =
      std::function<bool(const ConnectionInfo& remote, ConnectionInfo* local, std::string* error)>;

  void start_sender(const ConnectionInfo& local, Apply apply);
  // `received_info`: the sender's info, already read (by the listener hub,
  // or from the listener's mailbox).
  void start_receiver(Apply apply, const uint8_t* received_info);
  SetupProgress advance(ExchangeCarrier& carrier, std::string* error);

 private:
  enum class Step { Connect, SendInfo, ReceiveInfo, SendReady, ReceiveReady, Done };
  SetupProgress receive_info(ExchangeCarrier& carrier, std::string* error);

  Role role_ = Role::Sender;
  Step step_ = Step::Connect;
  Apply apply_;
  uint8_t out_[kConnectionInfoSize] = {};
  uint8_t in_[kConnectionInfoSize] = {};
  bool info_received_ = false;  // in_ holds the peer's info already
  uint8_t ready_ = 1;
};

}  // namespace weft::verbs
