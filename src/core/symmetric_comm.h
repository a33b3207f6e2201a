// What every transport's one-sided comm shares (weft/one_sided.h): the
// symmetric registration, the regions a comm holds, where the other ranks'
// copies are, signals that arrive as messages, and its context blocks. A
// transport supplies the registration of local memory, the sending of
// setup records to a rank, and the blocks.
//
// Windows on demand: nothing is traded at connect or registration. The
// first operation to a rank on a region asks that rank for its copy (an
// ask record, answered with a window record, in the background of
// progress), so a rank never addressed costs nothing: no provider
// connection, no queue pair, no address, no message (docs/one-sided.md).
#pragma once

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_set>
#include <utility>
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

  enum class WindowLookup { Known, Waiting, Missing };
  // Where `rank`'s copy of `region` is (*window). On demand, a copy not
  // known yet is asked for, once: Waiting until the answer; Missing, with
  // *why, when that rank holds none, never answered or could not be asked.
  WindowLookup window_of(const RmaRegion& region, uint32_t rank, const RmaWindow** window,
                         std::string* why);
  // The size of `rank`'s copy where known, else this rank's: registrations
  // are symmetric, so an argument outside this one is refused at once.
  uint64_t size_for_checks(const RmaRegion& region, uint32_t rank) const;
  // A record from the network, proven to be from the
  // rank it names and decoded (decode_rma_on_demand_record), handed over by
  // the transport outside its completion lock.
  void take_on_demand_record(const RmaRecord& record);
  // The same from the bytes that arrived: dropped (a rate-limited log line)
  // unless they prove to come from the rank they name, refused by name when
  // malformed.
  void take_on_demand_bytes(const uint8_t* bytes, size_t size);
  // A record this rank sent to `rank` was not delivered.
  void on_demand_send_failed(const RmaRecord& record, uint32_t rank, const std::string& why);
  // Asks unanswered for the connect timeout go missing; the transport's
  // progress calls it (a clock read only while asks are open).
  void expire_asks();

 protected:
  // Asks unanswered for `ask_timeout_ms` are given up.
  SymmetricComm(int rank, int rank_count, int ask_timeout_ms)
      : rank_(rank), rank_count_(rank_count), ask_timeout_ms_(ask_timeout_ms) {}
  // Closes the blocks and releases the regions left: the transport's
  // destructor calls it while its registrations can still be undone.
  void close_all();

  // This rank's copy: *local, *descriptor for the block's operations, and
  // what the other ranks address it by.
  virtual ncclResult_t register_local(void* data, size_t size, int type, int dmabuf_fd,
                                      uint64_t dmabuf_offset, void** local, void** descriptor,
                                      uint64_t* address, uint64_t* key) = 0;
  virtual ncclResult_t deregister_local(void* local) = 0;
  virtual std::unique_ptr<RmaBlockBase> make_block(const RmaContextConfig& config,
                                                   ncclResult_t* result) = 0;
  // Sends an ask or an answer to `rank` without waiting
  // (the transport queues what cannot go yet and reports a record it could
  // not deliver to on_demand_send_failed).
  virtual void send_on_demand(uint32_t rank, const RmaRecord& record) = 0;
  // Every rank's listen secret, by rank, from the handles connect was
  // given: this rank's records carry its own (RmaRecord::proof), and a
  // record that does not carry its sender's is not from the comm.
  void set_rank_secrets(const std::vector<ListenHandle>& handles) {
    secrets_.clear();
    for (const ListenHandle& handle : handles) secrets_.push_back(handle.secret);
  }
  const std::vector<uint64_t>& rank_secrets() const { return secrets_; }
  int ask_timeout_ms() const { return ask_timeout_ms_; }
  uint64_t own_proof() const { return secrets_.empty() ? 0 : secrets_[static_cast<size_t>(rank_)]; }

 private:
  ncclResult_t register_symmetric(void* data, size_t size, int type, int fd, uint64_t offset,
                                  void** mhandle);
  // This rank's copy only, and answers to asks that came before it.
  ncclResult_t register_on_demand(std::unique_ptr<RmaRegion> region, ncclResult_t local_result,
                                  const RmaRecord& mine, void** mhandle);
  // This rank's answer to an ask for the region of step `round` (size 0:
  // none held). Under regions_mutex_.
  RmaRecord answer_for(uint32_t round) const;
  // A record of this rank's about step `round`: an ask, or the bare
  // start of an answer.
  RmaRecord ask_for(uint32_t round, RmaRecordKind kind = RmaRecordKind::WindowAsk) const;
  RmaRegion* region_by_round(uint32_t round) const;
  void mark_missing(uint32_t round, uint32_t rank, const std::string& why);
  // Forgets the open ask of `rank` for step `round`. Under regions_mutex_.
  void close_ask(uint32_t round, uint32_t rank);

  int rank_;
  int rank_count_;
  int ask_timeout_ms_;
  uint32_t round_ = 0;
  std::vector<uint64_t> secrets_;
  std::vector<std::unique_ptr<RmaBlockBase>> blocks_;
  RmaBlockBase* default_block_ = nullptr;
  // Regions not deregistered yet: closing the comm lets go of them.
  std::unordered_set<RmaRegion*> regions_;
  // Asks that came before their region was registered
  // here (rank, step), asks of this rank still open, and why a window is
  // missing (by step and rank).
  struct OpenAsk {
    uint32_t round;
    uint32_t rank;
    std::chrono::steady_clock::time_point deadline;
    // Asked again then (a provider may lose an unexpected message: 1.17's
    // shm does), twice as late each time.
    std::chrono::steady_clock::time_point again;
    std::chrono::milliseconds pause{1000};
  };
  std::vector<std::pair<uint32_t, uint32_t>> deferred_asks_;
  std::vector<OpenAsk> open_asks_;
  std::atomic<int> open_ask_count_{0};
  std::atomic<int64_t> next_scan_ns_{0};  // expire_asks' next look
  std::map<std::pair<uint32_t, uint32_t>, std::string> missing_why_;
  // Guards regions_ (and the above) against apply_signal and answers on a
  // thread polling completions.
  mutable std::mutex regions_mutex_;
};

}  // namespace weft
