// What every transport's one-sided comm shares (weft/one_sided.h): the
// symmetric registration's steps (register this rank's copy, trade
// addresses and keys with every rank, refuse the region on every rank if
// one could not register), the regions a comm holds, signals that arrive as
// messages, and its context blocks. A transport supplies the registration
// of local memory, the collective exchange of records, and the blocks.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <unordered_set>
#include <vector>

#include "core/handle_header.h"
#include "core/rma_record.h"
#include "core/rma_region.h"
#include "weft/one_sided.h"

namespace weft {

// A block of contexts as the comm keeps it.
class RmaBlockBase : public RmaContext {
 public:
  // Whether requests are still in flight (their memory must outlive them).
  virtual bool busy() = 0;
};

class SymmetricComm : public RmaComm {
 public:
  ~SymmetricComm() override;

  int rank() const override { return rank_; }
  int rank_count() const override { return rank_count_; }
  ncclResult_t reg_mr_sym(void* data, size_t size, int type, uint64_t flags,
                          void** mhandle) override;
  ncclResult_t reg_mr_sym_dmabuf(void* data, size_t size, int type, uint64_t offset, int fd,
                                 uint64_t flags, void** mhandle) override;
  ncclResult_t dereg_mr_sym(void* mhandle) override;
  ncclResult_t create_context(const RmaContextConfig& config, RmaContext** context) override;
  ncclResult_t destroy_context(RmaContext* context) override;
  ncclResult_t default_context(RmaContext** context) override;

  virtual const std::string& device_name() const = 0;
  // A region of this comm, or null (and a log naming `what`).
  const RmaRegion* region_of(void* mhandle, const char* what) const;
  // Adds a signal message's value to this rank's copy of its region; false
  // (logged) when the message names no word of a host region of this comm.
  // `lacks_atomics`: what has no remote atomics (the provider, the device),
  // named when a signal targets GPU memory. Allocates nothing.
  bool apply_signal(const RmaSignal& signal, const std::string& lacks_atomics);

 protected:
  SymmetricComm(int rank, int rank_count) : rank_(rank), rank_count_(rank_count) {}
  // Closes the blocks and releases the regions left: the transport's
  // destructor calls it while its registrations can still be undone.
  void close_all();

  // This rank's copy: *local, *descriptor for the block's operations, and
  // what the other ranks address it by.
  virtual ncclResult_t register_local(void* data, size_t size, int type, int dmabuf_fd,
                                      uint64_t dmabuf_offset, void** local, void** descriptor,
                                      uint64_t* address, uint64_t* key) = 0;
  virtual ncclResult_t deregister_local(void* local) = 0;
  // Sends `mine` to every other rank and gathers theirs (by rank, with
  // `mine` at this rank's place), for collective step `round`. Blocking.
  virtual ncclResult_t exchange(const RmaRecord& mine, uint32_t round, std::vector<RmaRecord>* all,
                                const char* what) = 0;
  virtual std::unique_ptr<RmaBlockBase> make_block(const RmaContextConfig& config,
                                                   ncclResult_t* result) = 0;
  // The next collective step (records of a step carry it).
  uint32_t take_round() { return round_++; }
  // Every rank's listen secret, by rank, from the handles connect was
  // given: this rank's records carry its own (RmaRecord::proof), and a
  // record that does not carry its sender's is not from the comm.
  void set_rank_secrets(const std::vector<ListenHandle>& handles) {
    secrets_.clear();
    for (const ListenHandle& handle : handles) secrets_.push_back(handle.secret);
  }
  const std::vector<uint64_t>& rank_secrets() const { return secrets_; }
  uint64_t own_proof() const { return secrets_.empty() ? 0 : secrets_[static_cast<size_t>(rank_)]; }

 private:
  ncclResult_t register_symmetric(void* data, size_t size, int type, int fd, uint64_t offset,
                                  void** mhandle);

  int rank_;
  int rank_count_;
  uint32_t round_ = 0;
  std::vector<uint64_t> secrets_;
  std::vector<std::unique_ptr<RmaBlockBase>> blocks_;
  RmaBlockBase* default_block_ = nullptr;
  // Regions not deregistered yet: closing the comm lets go of them.
  std::unordered_set<RmaRegion*> regions_;
  // Guards regions_ against apply_signal on a thread polling completions.
  mutable std::mutex regions_mutex_;
};

}  // namespace weft
