// A listening verbs comm: its place in the process's listener hub and its
// mailbox on the liveness links (connectors use one or the other), and the
// connections being accepted (NCCL's accept() returns nothing until an
// exchange finished). Exchanges advance side by side, so a connector that
// stalls (a peer that died, a stale or forged handle) cannot hold up the
// ones behind it; each is dropped after WEFT_CONNECT_TIMEOUT_MS. A
// connector whose info does not present the handle's secret is dropped
// before anything is made for it (core/listen_secret.h).
#pragma once

#include <chrono>
#include <memory>
#include <vector>

#include "verbs/listener_hub.h"
#include "verbs/recv_comm.h"

namespace weft::verbs {

class VerbsListenComm final : public ListenComm {
 public:
  // `mailbox`: open in options.links (closed with this comm), 0 for none.
  // While open, `secret` proves a link hello to options.links.
  VerbsListenComm(std::shared_ptr<OpenPort> port, std::shared_ptr<ListenerHub> hub,
                  uint32_t listen_id, uint64_t secret, uint32_t mailbox, const RecvOptions& options,
                  int connect_timeout_ms);
  ~VerbsListenComm() override;
  VerbsListenComm(const VerbsListenComm&) = delete;
  VerbsListenComm& operator=(const VerbsListenComm&) = delete;

  ncclResult_t accept(RecvComm** recv_comm) override;

  // Exchanges in progress at most; later connectors wait in the backlog.
  static constexpr size_t kMaxAccepting = 64;

 private:
  struct Accepting {
    std::unique_ptr<VerbsRecvComm> comm;
    std::chrono::steady_clock::time_point deadline;
  };
  ncclResult_t take_new_connections();
  // A receive comm for a connector whose info arrived (`setup` says how),
  // unless admits() refuses it.
  ncclResult_t start_accepting(ConnectionSetup setup, const uint8_t* info);
  // Whether `info` is well formed and presents this listener's secret;
  // logs (rate-limited) why not.
  bool admits(const uint8_t* info, const std::string& from) const;

  std::shared_ptr<OpenPort> port_;
  std::shared_ptr<ListenerHub> hub_;
  uint32_t listen_id_;
  uint64_t secret_;
  uint32_t mailbox_;
  RecvOptions options_;
  std::chrono::milliseconds connect_timeout_;
  std::vector<Accepting> accepting_;
};

}  // namespace weft::verbs
