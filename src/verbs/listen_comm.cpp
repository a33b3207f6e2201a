#include "verbs/listen_comm.h"

namespace weft::verbs {

VerbsListenComm::VerbsListenComm(std::shared_ptr<Nic> nic, std::unique_ptr<TcpListener> listener,
                                 uint32_t listen_id, const RecvOptions& options,
                                 int close_timeout_ms)
    : nic_(std::move(nic)),
      listener_(std::move(listener)),
      listen_id_(listen_id),
      options_(options),
      close_timeout_ms_(close_timeout_ms) {}

ncclResult_t VerbsListenComm::accept(RecvComm** recv_comm) {
  *recv_comm = nullptr;
  std::string error;
  if (!accepting_) {
    TcpStream stream;
    if (!listener_->accept(&stream, &error)) {
      WEFT_WARN("%s: accepting a connection on %s failed: %s", nic_->name().c_str(),
                listener_->address().text().c_str(), error.c_str());
      return ncclSystemError;
    }
    if (!stream.valid()) return ncclSuccess;
    ConnectionSetup setup;
    setup.nic = nic_;
    setup.peer_name = stream.peer().text();
    setup.stream = std::move(stream);
    setup.close_timeout_ms = close_timeout_ms_;
    auto comm = std::make_unique<VerbsRecvComm>(std::move(setup), options_, listen_id_);
    if (!comm->prepare(&error)) {
      WEFT_WARN("%s: preparing a receive comm failed: %s", nic_->name().c_str(), error.c_str());
      return ncclSystemError;
    }
    accepting_ = std::move(comm);
  }
  switch (accepting_->advance_setup(&error)) {
    case SetupProgress::Pending:
      return ncclSuccess;
    case SetupProgress::Failed:
      // A stray or broken connection must not end the listener: the
      // connecting side reports its own failure.
      WEFT_WARN("%s: dropped a connection attempt: %s", nic_->name().c_str(), error.c_str());
      accepting_.reset();
      return ncclSuccess;
    case SetupProgress::Done:
      break;
  }
  WEFT_INFO(NCCL_NET, "%s: accepted a connection from %s", nic_->name().c_str(),
            listener_->address().text().c_str());
  *recv_comm = accepting_.release();
  return ncclSuccess;
}

}  // namespace weft::verbs
