// One-sided comms over libfabric (weft/one_sided.h). Each device has an
// RDM endpoint of its own for them, opened with FI_RMA and FI_ATOMIC
// (OfiTransport), apart from the net comms' endpoint: their matching,
// message pool and protocol never meet. A comm knows every rank's address
// from the gathered listen handles, and uses it only once it addresses that
// rank: windows on demand (symmetric_comm.h), so connect and registration
// send nothing, the provider hears of a rank (address vector entry,
// connection) with the first operation to it, and a rank never addressed
// costs nothing.
#pragma once

#include <rdma/fabric.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/rma_block.h"
#include "core/rma_record.h"
#include "core/symmetric_comm.h"
#include "ofi/endpoint/completion.h"
#include "ofi/endpoint/endpoint.h"
#include "weft/one_sided.h"

namespace weft::ofi {

class RmaInbox;

class OfiRmaListenComm final : public RmaListenComm {
 public:
  OfiRmaListenComm(std::shared_ptr<Endpoint> endpoint, uint32_t id, uint64_t secret,
                   uint32_t fingerprint)
      : endpoint(std::move(endpoint)), id(id), secret(secret), fingerprint(fingerprint) {}
  ~OfiRmaListenComm() override {
    if (!handed_over) endpoint->release_id(id);
  }

  std::shared_ptr<Endpoint> endpoint;
  uint32_t id;                   // the comm's id on the endpoint, once connected
  uint64_t secret;               // its handle's (core/listen_secret.h)
  uint32_t fingerprint;          // provider and address format (handle_header.h)
  bool message_signals = false;  // the provider has no remote atomics
  bool handed_over = false;
};

struct RmaPeer {
  std::atomic<bool> inserted{false};  // address is its address vector entry
  fi_addr_t address = FI_ADDR_UNSPEC;
  uint32_t id = 0;  // its comm's id on its endpoint
  std::vector<uint8_t> raw_address;
  std::string name;
};

// The transport half of a one-sided comm over libfabric: the symmetric
// registrations, contexts and signal messages are core's (SymmetricComm,
// RmaBlock); this posts their operations on the comm's endpoint.
class OfiRmaComm final : public SymmetricComm, public RmaWire<OpContext> {
 public:
  // Checks every rank's handle and posts the comm's receives; talks to no
  // rank. An ask for a window unanswered within `timeout_ms` fails the
  // operations waiting for it, naming the rank.
  static ncclResult_t connect(void* const* handles, int nranks, int rank, OfiRmaListenComm* listen,
                              int timeout_ms, std::unique_ptr<OfiRmaComm>* out);
  ~OfiRmaComm() override;

  ncclResult_t progress() override;
  const std::string& device_name() const override { return endpoint_->device_name(); }

  // RmaWire: the blocks' operations.
  size_t max_operation_bytes() const override { return endpoint_->max_write_size(); }
  Posted write(uint32_t rank, uint8_t* local, size_t length, void* descriptor, uint64_t remote,
               uint64_t key, OpContext* op, std::string* error) override;
  Posted read(uint32_t rank, uint8_t* local, size_t length, void* descriptor, uint64_t remote,
              uint64_t key, OpContext* op, std::string* error) override;
  Posted signal(uint32_t rank, uint64_t* operand, void* operand_descriptor, uint64_t remote,
                uint64_t key, OpContext* op, std::string* error) override;
  // The provider has no remote atomics: signals travel as messages that
  // the target's progress applies (rma_inbox.h).
  bool signals_by_message() const override { return message_signals_; }
  ncclResult_t register_operands(void* data, size_t size, void** region,
                                 void** descriptor) override;
  void deregister_operands(void* region) override;

  Endpoint& endpoint() { return *endpoint_; }
  // `rank`'s address vector entry, inserted on first use; FI_ADDR_NOTAVAIL
  // with *error when the provider refused it.
  fi_addr_t peer_address(uint32_t rank, std::string* error);

 protected:
  ncclResult_t register_local(void* data, size_t size, int type, int dmabuf_fd,
                              uint64_t dmabuf_offset, void** local, void** descriptor,
                              uint64_t* address, uint64_t* key) override;
  ncclResult_t deregister_local(void* local) override;
  std::unique_ptr<RmaBlockBase> make_block(const RmaContextConfig& config,
                                           ncclResult_t* result) override;
  void send_on_demand(uint32_t rank, const RmaRecord& record) override;

 private:
  OfiRmaComm(std::shared_ptr<Endpoint> endpoint, uint32_t id, int rank, int nranks, int timeout_ms);
  Posted posted(ssize_t rc, const char* call, std::string* error) const;

  std::shared_ptr<Endpoint> endpoint_;
  uint32_t id_;
  std::unique_ptr<RmaPeer[]> peers_;  // by rank
  std::mutex peers_mutex_;            // inserting an address
  bool message_signals_ = false;
  std::unique_ptr<RmaInbox> inbox_;
};

}  // namespace weft::ofi
