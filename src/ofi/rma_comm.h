// One-sided comms over libfabric (weft/one_sided.h). Each device has an
// RDM endpoint of its own for them, opened with FI_RMA and FI_ATOMIC
// (OfiTransport), apart from the net comms' endpoint: their matching,
// message pool and protocol never meet. A comm knows every rank's address
// from the gathered listen handles; the ranks check each other with a
// hello at connect and trade their regions' addresses and keys in each
// symmetric registration, both as tagged messages on that endpoint.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <unordered_set>
#include <vector>

#include "core/rma_record.h"
#include "ofi/endpoint.h"
#include "weft/one_sided.h"

namespace weft::ofi {

class OfiRmaContext;
class RmaSignalInbox;

class OfiRmaListenComm final : public RmaListenComm {
 public:
  OfiRmaListenComm(std::shared_ptr<Endpoint> endpoint, uint32_t id, uint32_t fingerprint)
      : endpoint(std::move(endpoint)), id(id), fingerprint(fingerprint) {}
  ~OfiRmaListenComm() override {
    if (!handed_over) endpoint->release_id(id);
  }

  std::shared_ptr<Endpoint> endpoint;
  uint32_t id;                   // the comm's id on the endpoint, once connected
  uint32_t fingerprint;          // provider and address format (handle_header.h)
  bool message_signals = false;  // the provider has no remote atomics
  bool handed_over = false;
};

// Where one rank's copy of a symmetric region is.
struct RmaWindow {
  uint64_t address = 0;  // as that rank's provider names it (VA or offset)
  uint64_t key = 0;
  uint64_t size = 0;
};

// NCCL's mhandle of a symmetric registration.
struct OfiRmaRegion {
  static constexpr uint32_t kMagic = 0x57524d52;  // "WRMR"
  uint32_t magic = kMagic;
  uint32_t id = 0;  // the collective step that registered it: the same on every rank
  int type = NCCL_PTR_HOST;
  const void* comm = nullptr;  // the comm it was registered on
  uint8_t* base = nullptr;
  size_t size = 0;
  void* local = nullptr;  // this rank's registration (memory_region.h)
  void* descriptor = nullptr;
  std::vector<RmaWindow> windows;  // by rank, this one included
};

struct RmaPeer {
  fi_addr_t address = FI_ADDR_UNSPEC;
  uint32_t id = 0;  // its comm's id on its endpoint
  std::string name;
};

class OfiRmaComm final : public RmaComm {
 public:
  // Checks every rank's handle and says hello to all of them; returns once
  // every rank answered, or with an error naming those that did not within
  // `timeout_ms`.
  static ncclResult_t connect(void* const* handles, int nranks, int rank, OfiRmaListenComm* listen,
                              int timeout_ms, std::unique_ptr<OfiRmaComm>* out);
  ~OfiRmaComm() override;

  int rank() const override { return rank_; }
  int rank_count() const override { return static_cast<int>(peers_.size()); }
  ncclResult_t reg_mr_sym(void* data, size_t size, int type, uint64_t flags,
                          void** mhandle) override;
  ncclResult_t reg_mr_sym_dmabuf(void* data, size_t size, int type, uint64_t offset, int fd,
                                 uint64_t flags, void** mhandle) override;
  ncclResult_t dereg_mr_sym(void* mhandle) override;
  ncclResult_t create_context(const RmaContextConfig& config, RmaContext** context) override;
  ncclResult_t destroy_context(RmaContext* context) override;
  ncclResult_t default_context(RmaContext** context) override;
  ncclResult_t progress() override;

  Endpoint& endpoint() { return *endpoint_; }
  // The provider has no remote atomics: signals travel as messages that
  // the target's progress applies (rma_signal_inbox.h).
  bool signals_by_message() const { return inbox_ != nullptr; }
  // Adds a signal message's value to this rank's copy of its region; false
  // (logged) when the message names no word of a region of this comm.
  bool apply_signal(const RmaSignal& signal);
  const RmaPeer& peer(uint32_t rank) const { return peers_[rank]; }
  const std::string& device_name() const { return endpoint_->device_name(); }
  // A region of this comm, or null (and a log naming `what`).
  const OfiRmaRegion* region_of(void* mhandle, const char* what) const;

 private:
  OfiRmaComm(std::shared_ptr<Endpoint> endpoint, uint32_t id, int rank, int timeout_ms);
  ncclResult_t register_symmetric(void* data, size_t size, int type, int fd, uint64_t offset,
                                  void** mhandle);
  // Sends `mine` to every other rank and gathers theirs (by rank, with
  // `mine` at this rank's place). Blocking, collective.
  ncclResult_t exchange(const RmaRecord& mine, std::vector<RmaRecord>* all, const char* what);

  std::shared_ptr<Endpoint> endpoint_;
  uint32_t id_;
  int rank_;
  int timeout_ms_;
  uint32_t round_ = 0;
  std::vector<RmaPeer> peers_;
  // Setup messages' buffers: one record per rank, this rank's outgoing one
  // at its own place (registered once: FI_MR_LOCAL providers want it).
  std::vector<uint8_t> records_;
  void* records_region_ = nullptr;
  bool exchange_stuck_ = false;  // receives that would not cancel: keep the buffers
  std::vector<std::unique_ptr<OfiRmaContext>> contexts_;
  // Regions not deregistered yet: closing the comm lets go of them.
  std::unordered_set<OfiRmaRegion*> regions_;
  // Guards regions_ against apply_signal on a thread polling the endpoint.
  mutable std::mutex regions_mutex_;
  std::unique_ptr<RmaSignalInbox> inbox_;
  OfiRmaContext* default_context_ = nullptr;
};

}  // namespace weft::ofi
