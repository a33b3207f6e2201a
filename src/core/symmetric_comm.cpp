#include "core/symmetric_comm.h"

#include <chrono>

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
  // Every rank calls this in turn: a failure here must still take part in
  // the exchange, or the others would wait for this rank until they time out.
  auto region = std::make_unique<RmaRegion>();
  RmaRecord mine;
  mine.kind = RmaRecordKind::Window;
  ncclResult_t local_result = register_local(data, size, type, fd, offset, &region->local,
                                             &region->descriptor, &mine.address, &mine.key);
  if (local_result == ncclSuccess) mine.size = size;
  // Known to apply_signal before the exchange: a rank that finishes it
  // first may signal this region while this rank still waits in it.
  const uint32_t round = take_round();
  region->id = round;
  region->type = type;
  region->comm = this;
  region->base = static_cast<uint8_t*>(data);
  region->size = size;
  if (local_result == ncclSuccess) {
    std::lock_guard<std::mutex> lock(regions_mutex_);
    regions_.insert(region.get());
  }
  std::vector<RmaRecord> all;
  ncclResult_t result = exchange(mine, round, &all, "regMrSym");
  if (result == ncclSuccess && local_result != ncclSuccess) result = local_result;
  if (result == ncclSuccess) {
    for (size_t r = 0; r < all.size(); ++r) {
      if (all[r].size != 0) continue;
      WEFT_WARN("regMrSym on %s: rank %zu could not register its copy (see its log)",
                device_name().c_str(), r);
      result = ncclRemoteError;
      break;
    }
  }
  if (result != ncclSuccess) {
    {
      std::lock_guard<std::mutex> lock(regions_mutex_);
      regions_.erase(region.get());
    }
    if (region->local != nullptr) deregister_local(region->local);
    return result;
  }
  region->windows.resize(all.size());
  for (size_t r = 0; r < all.size(); ++r) {
    region->windows[r] = RmaWindow{all[r].address, all[r].key, all[r].size};
  }
  *mhandle = region.release();
  return ncclSuccess;
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
