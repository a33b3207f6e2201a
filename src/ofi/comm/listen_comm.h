// Listening side: accept() turns each connect request the endpoint's inbox
// kept for this listener (connect_inbox.h: it named this listener's id and
// presented the handle's secret) into a receive comm.
#pragma once

#include <memory>
#include <vector>

#include "ofi/comm/data_comm.h"
#include "ofi/comm/recv_comm.h"
#include "ofi/wire/connection_messages.h"

namespace weft::ofi {

// What the receive comms a listener accepts inherit.
struct ListenSetup {
  std::vector<std::shared_ptr<Endpoint>> extra_rails;  // rails 1.. of the device
  int close_timeout_ms = 2000;
  size_t min_stripe = 131072;
  std::shared_ptr<PeerLinks> links;  // liveness links; null: none
};

class OfiListenComm final : public ListenComm {
 public:
  OfiListenComm(std::shared_ptr<Endpoint> endpoint, uint32_t listen_id, uint64_t secret,
                ListenSetup setup);
  ~OfiListenComm() override;

  // Opens this listener's id in the endpoint's inbox.
  ncclResult_t start();
  ncclResult_t accept(RecvComm** recv_comm) override;
  void close() override;

 private:
  std::shared_ptr<Endpoint> endpoint_;
  std::string device_name_;
  uint32_t listen_id_;
  uint64_t secret_;
  ListenSetup setup_;
  bool opened_ = false;
  bool admitted_ = false;                   // secret_ proves link hellos (peer_links.h)
  std::unique_ptr<OfiRecvComm> accepting_;  // created, acknowledgement not yet posted
};

}  // namespace weft::ofi
