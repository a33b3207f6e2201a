#include "core/symmetric_comm.h"

#include <algorithm>
#include <chrono>

#include "core/listen_secret.h"
#include "weft/log.h"

namespace weft {

SymmetricComm::~SymmetricComm() = default;

void SymmetricComm::close_all() {
  while (!blocks_.empty()) destroy_context(blocks_.back().get());
  if (!regions_.empty()) {
    WEFT_INFO(NCCL_NET, "%s: one-sided comm closed with %zu regions still registered: released",
              device_name().c_str(), regions_.size());
    while (!regions_.empty()) dereg_mr_sym(*regions_.begin());
  }
}

const RmaRegion* SymmetricComm::region_of(void* mhandle, const char* what) const {
  auto* region = static_cast<const RmaRegion*>(mhandle);
  if (region == nullptr || region->magic != RmaRegion::kMagic || region->comm != this) {
    WEFT_WARN("%s: %p is not a region registered on this one-sided comm", what, mhandle);
    return nullptr;
  }
  return region;
}

bool SymmetricComm::apply_signal(const RmaSignal& signal, const std::string& lacks_atomics) {
  std::lock_guard<std::mutex> lock(regions_mutex_);
  for (RmaRegion* region : regions_) {
    if (region->id != signal.region) continue;
    if (signal.offset > region->size || region->size - signal.offset < 8) {
      WEFT_WARN("%s: rank %u signals offset %llu of a %zu-byte region", device_name().c_str(),
                signal.sender, static_cast<unsigned long long>(signal.offset), region->size);
      return false;
    }
    if (region->type != NCCL_PTR_HOST) {
      WEFT_WARN(
          "%s: rank %u signals GPU memory, which weft can add to only with remote atomics (%s "
          "has none)",
          device_name().c_str(), signal.sender, lacks_atomics.c_str());
      return false;
    }
    auto* word = reinterpret_cast<uint64_t*>(region->base + signal.offset);
    __atomic_fetch_add(word, signal.value, __ATOMIC_RELEASE);
    return true;
  }
  WEFT_WARN("%s: rank %u signals region %u, which this rank does not hold (deregistered?)",
            device_name().c_str(), signal.sender, signal.region);
  return false;
}

ncclResult_t SymmetricComm::reg_mr_sym(void* data, size_t size, int type, uint64_t,
                                       void** mhandle) {
  return register_symmetric(data, size, type, -1, 0, mhandle);
}

ncclResult_t SymmetricComm::reg_mr_sym_dmabuf(void* data, size_t size, int type, uint64_t offset,
                                              int fd, uint64_t, void** mhandle) {
  if (fd < 0) {
    WEFT_WARN("regMrSymDmaBuf on %s: no dma-buf fd (%d)", device_name().c_str(), fd);
    return ncclInvalidArgument;
  }
  return register_symmetric(data, size, type, fd, offset, mhandle);
}

ncclResult_t SymmetricComm::register_symmetric(void* data, size_t size, int type, int fd,
                                               uint64_t offset, void** mhandle) {
  *mhandle = nullptr;
  if (data == nullptr || size == 0) {
    WEFT_WARN("regMrSym on %s: %zu bytes at %p: nothing to register", device_name().c_str(), size,
              data);
    return ncclInvalidArgument;
  }
  // Only this rank's copy: the others learn it when they first address it.
  auto region = std::make_unique<RmaRegion>();
  RmaRecord mine;
  mine.kind = RmaRecordKind::Window;
  ncclResult_t local_result = register_local(data, size, type, fd, offset, &region->local,
                                             &region->descriptor, &mine.address, &mine.key);
  if (local_result == ncclSuccess) mine.size = size;
  region->type = type;
  region->comm = this;
  region->base = static_cast<uint8_t*>(data);
  region->size = size;
  return register_on_demand(std::move(region), local_result, mine, mhandle);
}

ncclResult_t SymmetricComm::register_on_demand(std::unique_ptr<RmaRegion> region,
                                               ncclResult_t local_result, const RmaRecord& mine,
                                               void** mhandle) {
  const auto count = static_cast<size_t>(rank_count_);
  if (local_result == ncclSuccess) {
    region->windows.assign(count, RmaWindow{});
    region->windows[static_cast<size_t>(rank_)] = RmaWindow{mine.address, mine.key, mine.size};
    region->window_state = std::make_unique<std::atomic<uint8_t>[]>(count);
    for (size_t r = 0; r < count; ++r) {
      region->window_state[r].store(
          static_cast<uint8_t>(r == static_cast<size_t>(rank_) ? RmaWindowState::Known
                                                               : RmaWindowState::Unknown),
          std::memory_order_relaxed);
    }
  }
  // Ranks that asked for this step before this rank reached it.
  std::vector<uint32_t> waiting;
  RmaRecord answer;
  {
    std::lock_guard<std::mutex> lock(regions_mutex_);
    region->id = round_++;
    if (local_result == ncclSuccess) regions_.insert(region.get());
    for (auto it = deferred_asks_.begin(); it != deferred_asks_.end();) {
      if (it->second != region->id) {
        ++it;
        continue;
      }
      waiting.push_back(it->first);
      it = deferred_asks_.erase(it);
    }
    answer = answer_for(region->id);
  }
  for (uint32_t rank : waiting) send_on_demand(rank, answer);
  if (local_result != ncclSuccess) return local_result;
  *mhandle = region.release();
  return ncclSuccess;
}

RmaRegion* SymmetricComm::region_by_round(uint32_t round) const {
  for (RmaRegion* region : regions_) {
    if (region->id == round) return region;
  }
  return nullptr;
}

RmaRecord SymmetricComm::ask_for(uint32_t round, RmaRecordKind kind) const {
  RmaRecord record;
  record.kind = kind;
  record.rank = static_cast<uint32_t>(rank_);
  record.ranks = static_cast<uint32_t>(rank_count_);
  record.round = round;
  record.proof = own_proof();
  return record;
}

RmaRecord SymmetricComm::answer_for(uint32_t round) const {
  RmaRecord answer = ask_for(round, RmaRecordKind::Window);
  if (const RmaRegion* region = region_by_round(round); region != nullptr) {
    const RmaWindow& own = region->windows[static_cast<size_t>(rank_)];
    answer.address = own.address;
    answer.key = own.key;
    answer.size = own.size;
  }
  return answer;
}

SymmetricComm::WindowLookup SymmetricComm::window_of(const RmaRegion& region, uint32_t rank,
                                                     const RmaWindow** window, std::string* why) {
  *window = &region.windows[rank];
  std::atomic<uint8_t>& state = region.window_state[rank];
  uint8_t seen = state.load(std::memory_order_acquire);
  if (seen == static_cast<uint8_t>(RmaWindowState::Known)) return WindowLookup::Known;
  if (seen == static_cast<uint8_t>(RmaWindowState::Missing)) {
    std::lock_guard<std::mutex> lock(regions_mutex_);
    auto found = missing_why_.find({region.id, rank});
    *why = found != missing_why_.end() ? found->second : "no window";
    return WindowLookup::Missing;
  }
  if (seen == static_cast<uint8_t>(RmaWindowState::Unknown) &&
      state.compare_exchange_strong(seen, static_cast<uint8_t>(RmaWindowState::Asked),
                                    std::memory_order_acq_rel)) {
    {
      std::lock_guard<std::mutex> lock(regions_mutex_);
      const auto now = std::chrono::steady_clock::now();
      OpenAsk ask{region.id, rank, now + std::chrono::milliseconds(ask_timeout_ms_), {}};
      ask.again = now + ask.pause;
      open_asks_.push_back(ask);
    }
    open_ask_count_.fetch_add(1, std::memory_order_acq_rel);
    send_on_demand(rank, ask_for(region.id));
  }
  return WindowLookup::Waiting;
}

uint64_t SymmetricComm::size_for_checks(const RmaRegion& region, uint32_t rank) const {
  if (region.window_state[rank].load(std::memory_order_acquire) ==
      static_cast<uint8_t>(RmaWindowState::Known)) {
    return region.windows[rank].size;
  }
  return region.size;
}

void SymmetricComm::close_ask(uint32_t round, uint32_t rank) {
  for (auto it = open_asks_.begin(); it != open_asks_.end(); ++it) {
    if (it->round != round || it->rank != rank) continue;
    open_asks_.erase(it);
    open_ask_count_.fetch_sub(1, std::memory_order_acq_rel);
    return;
  }
}

void SymmetricComm::mark_missing(uint32_t round, uint32_t rank, const std::string& why) {
  close_ask(round, rank);
  RmaRegion* region = region_by_round(round);
  if (region == nullptr) return;  // deregistered since
  missing_why_[{round, rank}] = why;
  region->window_state[rank].store(static_cast<uint8_t>(RmaWindowState::Missing),
                                   std::memory_order_release);
}

void SymmetricComm::take_on_demand_record(const RmaRecord& record) {
  if (record.kind == RmaRecordKind::WindowAsk) {
    RmaRecord answer;
    {
      std::lock_guard<std::mutex> lock(regions_mutex_);
      if (record.round >= round_ && region_by_round(record.round) == nullptr) {
        // Asked before this rank registered it: answered when it does.
        // An ask sent again is waiting already.
        const std::pair<uint32_t, uint32_t> deferred(record.rank, record.round);
        if (std::find(deferred_asks_.begin(), deferred_asks_.end(), deferred) ==
            deferred_asks_.end()) {
          deferred_asks_.push_back(deferred);
        }
        return;
      }
      answer = answer_for(record.round);
    }
    send_on_demand(record.rank, answer);
    return;
  }
  std::lock_guard<std::mutex> lock(regions_mutex_);
  RmaRegion* region = region_by_round(record.round);
  if (region == nullptr) return;  // deregistered while its ask was open
  std::atomic<uint8_t>& state = region->window_state[record.rank];
  const uint8_t seen = state.load(std::memory_order_acquire);
  if (seen != static_cast<uint8_t>(RmaWindowState::Asked)) {
    // A second answer to an ask sent again is no news.
    if (seen != static_cast<uint8_t>(RmaWindowState::Known)) {
      WEFT_WARN("%s: rank %u sent its copy of region %u, which this rank did not ask for: ignored",
                device_name().c_str(), record.rank, record.round);
    }
    return;
  }
  if (record.size == 0) {
    mark_missing(record.round, record.rank,
                 "rank " + std::to_string(record.rank) +
                     " holds no copy of the region (its regMrSym failed, or it deregistered it; "
                     "see its log)");
    return;
  }
  region->windows[record.rank] = RmaWindow{record.address, record.key, record.size};
  close_ask(record.round, record.rank);
  state.store(static_cast<uint8_t>(RmaWindowState::Known), std::memory_order_release);
}

void SymmetricComm::take_on_demand_bytes(const uint8_t* bytes, size_t size) {
  RmaRecord record;
  std::string problem;
  const bool decoded = decode_rma_on_demand_record(bytes, size, static_cast<uint32_t>(rank_count_),
                                                   static_cast<uint32_t>(rank_), &record, &problem);
  if (!rma_record_proven(bytes, size, secrets_)) {
    // Whoever sent it was handed no handle of this comm.
    log_refused_connect("one-sided comm on " + device_name(), "a sender on the fabric",
                        "its setup message proved no rank's listen secret" +
                            (decoded ? std::string() : " (" + problem + ")"));
    return;
  }
  if (!decoded) {
    WEFT_WARN("%s: a setup message from a rank of the comm is refused: %s", device_name().c_str(),
              problem.c_str());
    return;
  }
  take_on_demand_record(record);
}

void SymmetricComm::on_demand_send_failed(const RmaRecord& record, uint32_t rank,
                                          const std::string& why) {
  if (record.kind != RmaRecordKind::WindowAsk) {
    WEFT_WARN("%s: answering rank %u's ask for region %u failed: %s", device_name().c_str(), rank,
              record.round, why.c_str());
    return;
  }
  std::lock_guard<std::mutex> lock(regions_mutex_);
  mark_missing(
      record.round, rank,
      "asking rank " + std::to_string(rank) + " for its copy of the region failed: " + why);
}

void SymmetricComm::expire_asks() {
  if (open_ask_count_.load(std::memory_order_acquire) == 0) return;
  // Deadlines are seconds apart: a scan every 10 ms, not per progress call
  // (thousands of asks are open at once in an alltoall's first round).
  const auto now = std::chrono::steady_clock::now();
  const int64_t now_ns =
      std::chrono::duration_cast<std::chrono::nanoseconds>(now.time_since_epoch()).count();
  int64_t due = next_scan_ns_.load(std::memory_order_relaxed);
  if (now_ns < due ||
      !next_scan_ns_.compare_exchange_strong(due, now_ns + 10'000'000, std::memory_order_relaxed)) {
    return;
  }
  std::vector<std::pair<uint32_t, uint32_t>> again;  // rank, step
  {
    std::lock_guard<std::mutex> lock(regions_mutex_);
    std::vector<OpenAsk> expired;
    for (OpenAsk& ask : open_asks_) {
      if (ask.deadline <= now) {
        expired.push_back(ask);
      } else if (ask.again <= now) {
        again.emplace_back(ask.rank, ask.round);
        ask.pause *= 2;
        ask.again = now + ask.pause;
      }
    }
    for (const OpenAsk& ask : expired) {
      mark_missing(ask.round, ask.rank,
                   "rank " + std::to_string(ask.rank) + " did not answer within " +
                       std::to_string(ask_timeout_ms_) +
                       " ms (WEFT_CONNECT_TIMEOUT_MS): is it running, and does it drive progress?");
    }
  }
  for (const auto& [rank, round] : again) send_on_demand(rank, ask_for(round));
}

ncclResult_t SymmetricComm::dereg_mr_sym(void* mhandle) {
  const RmaRegion* region = region_of(mhandle, "deregMrSym");
  if (region == nullptr) return ncclInvalidArgument;
  std::unique_ptr<RmaRegion> owned(const_cast<RmaRegion*>(region));
  {
    std::lock_guard<std::mutex> lock(regions_mutex_);
    regions_.erase(owned.get());
  }
  owned->magic = 0;
  return deregister_local(owned->local);
}

ncclResult_t SymmetricComm::create_context(const RmaContextConfig& config, RmaContext** context) {
  *context = nullptr;
  if (config.contexts < 1 || config.contexts > 1024) {
    WEFT_WARN("createContext on %s: %d contexts in one block, weft takes 1..1024",
              device_name().c_str(), config.contexts);
    return ncclInvalidArgument;
  }
  if (config.listed_peers) {
    std::vector<bool> seen(static_cast<size_t>(rank_count()), false);
    for (int peer : config.peers) {
      if (peer < 0 || peer >= rank_count() || seen[static_cast<size_t>(peer)]) {
        WEFT_WARN("createContext on %s: peer %d is %s", device_name().c_str(), peer,
                  peer < 0 || peer >= rank_count() ? "not a rank of the comm" : "listed twice");
        return ncclInvalidArgument;
      }
      seen[static_cast<size_t>(peer)] = true;
    }
  } else if (config.rank_stride < 1 || rank_count() % config.rank_stride != 0) {
    WEFT_WARN("createContext on %s: rank stride %d does not divide %d ranks", device_name().c_str(),
              config.rank_stride, rank_count());
    return ncclInvalidArgument;
  }
  ncclResult_t result = ncclSuccess;
  std::unique_ptr<RmaBlockBase> made = make_block(config, &result);
  if (result != ncclSuccess) return result;
  blocks_.push_back(std::move(made));
  *context = blocks_.back().get();
  return ncclSuccess;
}

ncclResult_t SymmetricComm::destroy_context(RmaContext* context) {
  for (auto it = blocks_.begin(); it != blocks_.end(); ++it) {
    if (it->get() != context) continue;
    if (context == default_block_) default_block_ = nullptr;
    auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while ((*it)->busy() && std::chrono::steady_clock::now() < give_up) {
      if ((*it)->progress() != ncclSuccess) break;
    }
    if ((*it)->busy()) {
      // The device may still complete into its requests.
      WEFT_WARN("destroyContext on %s: operations still in flight after 5 s; their memory is kept",
                device_name().c_str());
      (void)it->release();
    }
    blocks_.erase(it);
    return ncclSuccess;
  }
  WEFT_WARN("destroyContext on %s: %p is not a context of this comm", device_name().c_str(),
            static_cast<void*>(context));
  return ncclInvalidArgument;
}

ncclResult_t SymmetricComm::default_context(RmaContext** context) {
  if (default_block_ == nullptr) {
    RmaContext* made = nullptr;
    if (ncclResult_t result = create_context(RmaContextConfig{}, &made); result != ncclSuccess) {
      return result;
    }
    default_block_ = static_cast<RmaBlockBase*>(made);
  }
  *context = default_block_;
  return ncclSuccess;
}

}  // namespace weft
