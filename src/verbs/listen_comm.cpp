#include "verbs/listen_comm.h"

#include "core/listen_secret.h"

namespace weft::verbs {

VerbsListenComm::VerbsListenComm(std::shared_ptr<OpenPort> port, std::shared_ptr<ListenerHub> hub,
                                 uint32_t listen_id, uint64_t secret, uint32_t mailbox,
                                 const RecvOptions& options, int connect_timeout_ms)
    : port_(std::move(port)),
      hub_(std::move(hub)),
      listen_id_(listen_id),
      secret_(secret),
      mailbox_(mailbox),
      options_(options),
      connect_timeout_(connect_timeout_ms) {
  hub_->add(listen_id_);
  // A connector opens its link to this process presenting the secret.
  if (options_.links) options_.links->admit(secret_);
}

VerbsListenComm::~VerbsListenComm() {
  hub_->remove(listen_id_);
  if (options_.links) options_.links->revoke(secret_);
  // Connectors whose info waits there unread hear that it closed.
  if (mailbox_ != 0) options_.links->close_mailbox(mailbox_);
}

bool VerbsListenComm::admits(const uint8_t* info, const std::string& from) const {
  ConnectionInfo decoded;
  std::string problem;
  const std::string where = port_->name() + " listener " + std::to_string(listen_id_);
  if (!decode_connection_info(info, kConnectionInfoSize, Role::Sender, &decoded, &problem)) {
    log_refused_connect(where, from, "bad connection info: " + problem);
    return false;
  }
  if (!listen_secret_matches(secret_, decoded.secret)) {
    log_refused_connect(where, from);
    return false;
  }
  return true;
}

ncclResult_t VerbsListenComm::start_accepting(ConnectionSetup setup, const uint8_t* info) {
  // Dropped unanswered: its stream closes, its mailbox hears nothing, and
  // nothing was made for it.
  if (!admits(info, setup.peer_name)) return ncclSuccess;
  setup.port = port_;
  setup.peer_timeout_ms = options_.peer_timeout_ms;
  setup.links = options_.links;
  auto comm = std::make_unique<VerbsRecvComm>(std::move(setup), options_, listen_id_);
  std::string error;
  if (!comm->prepare(info, &error)) {
    WEFT_WARN("%s: preparing a receive comm failed: %s", port_->name().c_str(), error.c_str());
    return ncclSystemError;
  }
  accepting_.push_back({std::move(comm), std::chrono::steady_clock::now() + connect_timeout_});
  return ncclSuccess;
}

ncclResult_t VerbsListenComm::take_new_connections() {
  if (accepting_.size() >= kMaxAccepting) return ncclSuccess;
  if (mailbox_ != 0) {
    LinkMessage message;
    while (accepting_.size() < kMaxAccepting && options_.links->take_message(mailbox_, &message)) {
      std::shared_ptr<PeerLink> link = message.link.lock();
      if (!link) continue;  // its link is gone: so is the connector
      if (message.kind != static_cast<uint8_t>(ExchangeCarrier::Part::kInfo) ||
          message.payload.size() != kConnectionInfoSize || message.from == 0) {
        WEFT_WARN(
            "%s: dropped a message from %s to listener %u: kind %d, %zu bytes, from mailbox %u "
            "(expected connection info, kind %d, %zu bytes)",
            port_->name().c_str(), link->name().c_str(), listen_id_, message.kind,
            message.payload.size(), message.from, static_cast<int>(ExchangeCarrier::Part::kInfo),
            kConnectionInfoSize);
        continue;
      }
      ConnectionSetup setup;
      setup.peer_name = link->name();
      setup.link = std::move(link);
      setup.peer_mailbox = message.from;
      if (ncclResult_t result = start_accepting(std::move(setup), message.payload.data());
          result != ncclSuccess) {
        return result;
      }
    }
  }
  std::string error;
  std::vector<ListenerHub::Arrival> arrivals;
  if (!hub_->take(listen_id_, kMaxAccepting - accepting_.size(), &arrivals, &error)) {
    WEFT_WARN("%s: accepting a connection on %s failed: %s", port_->name().c_str(),
              hub_->address().text().c_str(), error.c_str());
    return ncclSystemError;
  }
  for (ListenerHub::Arrival& arrival : arrivals) {
    ConnectionSetup setup;
    setup.peer_name = arrival.stream.peer().text();
    setup.stream = std::move(arrival.stream);
    if (ncclResult_t result = start_accepting(std::move(setup), arrival.info);
        result != ncclSuccess) {
      return result;
    }
  }
  return ncclSuccess;
}

ncclResult_t VerbsListenComm::accept(RecvComm** recv_comm) {
  *recv_comm = nullptr;
  if (ncclResult_t result = take_new_connections(); result != ncclSuccess) return result;
  const auto now = std::chrono::steady_clock::now();
  for (size_t i = 0; i < accepting_.size();) {
    Accepting& entry = accepting_[i];
    std::string error;
    SetupProgress progress = entry.comm->advance_setup(&error);
    if (progress == SetupProgress::Pending && now >= entry.deadline) {
      progress = SetupProgress::Failed;
      error = "no answer from " + entry.comm->peer_name() +
              " within WEFT_CONNECT_TIMEOUT_MS=" + std::to_string(connect_timeout_.count()) + " ms";
    }
    if (progress == SetupProgress::Pending) {
      ++i;
      continue;
    }
    std::unique_ptr<VerbsRecvComm> comm = std::move(entry.comm);
    accepting_.erase(accepting_.begin() + static_cast<std::ptrdiff_t>(i));
    if (progress == SetupProgress::Failed) {
      // A stray or broken connection must not end the listener: the
      // connecting side reports its own failure.
      WEFT_WARN("%s: dropped a connection attempt: %s", port_->name().c_str(), error.c_str());
      continue;
    }
    WEFT_INFO(NCCL_NET, "%s: accepted a connection from %s", port_->name().c_str(),
              comm->peer_name().c_str());
    *recv_comm = comm.release();
    return ncclSuccess;
  }
  return ncclSuccess;
}

}  // namespace weft::verbs
