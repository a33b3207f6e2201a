// Listening side: a tagged receive for connect requests addressed to this
// listener's id. accept() turns each request that presents the handle's
// secret into a receive comm; one that does not is dropped unanswered.
#pragma once

#include <atomic>
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

class OfiListenComm final : public ListenComm, public CompletionTarget {
 public:
  OfiListenComm(std::shared_ptr<Endpoint> endpoint, uint32_t listen_id, uint64_t secret,
                ListenSetup setup);
  ~OfiListenComm() override;

  // Registers the request buffer and posts the first receive.
  ncclResult_t start();
  ncclResult_t accept(RecvComm** recv_comm) override;
  void close() override;

  void on_complete(uint32_t slot, size_t length, const uint64_t* remote_data) override;
  void on_error(uint32_t slot, int error, size_t overflow_length, const char* text) override;

 private:
  ncclResult_t post_request_receive();

  std::shared_ptr<Endpoint> endpoint_;
  std::string device_name_;
  uint32_t listen_id_;
  uint64_t secret_;
  ListenSetup setup_;
  void* region_ = nullptr;
  bool posted_ = false;
  std::atomic<bool> arrived_{false};
  std::atomic<int> error_{0};
  size_t length_ = 0;
  char error_text_[160] = {};
  OpContext op_;
  uint8_t buffer_[kConnectRequestSize] = {};
  std::unique_ptr<OfiRecvComm> accepting_;  // created, acknowledgement not yet posted
};

}  // namespace weft::ofi
