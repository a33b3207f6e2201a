#include "verbs/device_limits.h"

#include <limits>

namespace weft::verbs {
namespace {

struct ObjectText {
  const char* plural;
  const char* attribute;
  const char* advice;
};

// What takes each object, and the knobs that lower weft's use of it.
constexpr ObjectText kTexts[] = {
    {"queue pairs", "max_qp",
     "each send comm takes WEFT_IB_QPS_PER_CONNECTION of them, each receive comm as many plus 2 "
     "for GPU flushes: lower WEFT_IB_QPS_PER_CONNECTION, or open fewer comms "
     "(NCCL_NCHANNELS_PER_NET_PEER, NCCL_MAX_NCHANNELS)"},
    {"completion queues", "max_cq",
     "each send comm takes one, each receive comm one plus one for GPU flushes: open fewer comms "
     "(NCCL_NCHANNELS_PER_NET_PEER, NCCL_MAX_NCHANNELS)"},
    {"memory regions", "max_mr",
     "each comm registers one of its own and each buffer NCCL registers takes one: keep "
     "WEFT_MR_CACHE=1 (registrations of the same pages shared), or open fewer comms"},
};

}  // namespace

void DeviceLimits::configure(const std::string& device_name, const ibv_device_attr& attr) {
  device_name_ = device_name;
  // A device reporting 0 (or a negative) states no limit.
  auto limit_or_none = [](int value) {
    return value > 0 ? value : std::numeric_limits<int>::max();
  };
  limits_[index(DeviceObject::QueuePair)] = limit_or_none(attr.max_qp);
  limits_[index(DeviceObject::CompletionQueue)] = limit_or_none(attr.max_cq);
  limits_[index(DeviceObject::MemoryRegion)] = limit_or_none(attr.max_mr);
}

int DeviceLimits::held(DeviceObject kind) const {
  return held_[index(kind)].load(std::memory_order_relaxed);
}

std::string DeviceLimits::limit_text(DeviceObject kind) const {
  const ObjectText& text = kTexts[index(kind)];
  return device_name_ + " allows " + std::to_string(limit(kind)) + " " + text.plural +
         " (ibv_query_device " + text.attribute + ", shared by every process on the device)";
}

bool DeviceLimits::take(DeviceObject kind, int count, std::string* error) {
  std::atomic<int>& held = held_[index(kind)];
  const int limit = this->limit(kind);
  int now = held.load(std::memory_order_relaxed);
  do {
    if (count > limit - now) {
      const ObjectText& text = kTexts[index(kind)];
      *error = "cannot create " + std::to_string(count) + " more " + text.plural + ": " +
               limit_text(kind) + " and this process holds " + std::to_string(now) + "; " +
               text.advice;
      return false;
    }
  } while (!held.compare_exchange_weak(now, now + count, std::memory_order_relaxed));
  return true;
}

void DeviceLimits::release(DeviceObject kind, int count) {
  held_[index(kind)].fetch_sub(count, std::memory_order_relaxed);
}

std::string DeviceLimits::refusal_context(DeviceObject kind) const {
  return " (" + limit_text(kind) + "; this process holds " + std::to_string(held(kind)) + "; " +
         kTexts[index(kind)].advice + ")";
}

std::string completion_depth_problem(const std::string& device_name, int queue_pairs,
                                     int entries_per_qp, int max_cqe) {
  const long needed = static_cast<long>(queue_pairs) * entries_per_qp;
  if (max_cqe <= 0 || needed <= max_cqe) return {};
  const int fitting = max_cqe / entries_per_qp;
  return "a connection of " + std::to_string(queue_pairs) + " queue pairs needs " +
         std::to_string(needed) + " completion-queue entries and " + device_name + " allows " +
         std::to_string(max_cqe) + " (ibv_query_device max_cqe)" +
         (fitting > 0 ? ": lower WEFT_IB_QPS_PER_CONNECTION to at most " + std::to_string(fitting)
                      : ", less than one queue pair needs: weft cannot use this device");
}

}  // namespace weft::verbs
