// A listening verbs comm: the TCP side channel's listener, and the one
// connection being accepted (NCCL's accept() returns nothing until its
// exchange finished).
#pragma once

#include <memory>

#include "core/tcp_channel.h"
#include "verbs/recv_comm.h"

namespace weft::verbs {

class VerbsListenComm final : public ListenComm {
 public:
  VerbsListenComm(std::shared_ptr<Nic> nic, std::unique_ptr<TcpListener> listener,
                  uint32_t listen_id, const RecvOptions& options, int close_timeout_ms);

  ncclResult_t accept(RecvComm** recv_comm) override;

 private:
  std::shared_ptr<Nic> nic_;
  std::unique_ptr<TcpListener> listener_;
  uint32_t listen_id_;
  RecvOptions options_;
  int close_timeout_ms_;
  std::unique_ptr<VerbsRecvComm> accepting_;
};

}  // namespace weft::verbs
