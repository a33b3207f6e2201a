// The device objects this process holds on one verbs device (queue pairs,
// completion queues, memory regions), against the limits ibv_query_device
// reports: creating one past a limit fails at once with an error naming the
// limit and what lowers weft's use of it, instead of the device's bare
// ENOMEM. The device's limits are shared with every other process on it,
// so a refusal below them is explained with the same counts.
#pragma once

#include <infiniband/verbs.h>

#include <array>
#include <atomic>
#include <string>

namespace weft::verbs {

enum class DeviceObject { QueuePair, CompletionQueue, MemoryRegion };

class DeviceLimits {
 public:
  void configure(const std::string& device_name, const ibv_device_attr& attr);

  // Counts `count` more objects of `kind`; false, with the reason in
  // *error and nothing counted, where that passes the device's limit.
  bool take(DeviceObject kind, int count, std::string* error);
  void release(DeviceObject kind, int count);
  // Appended to a creation the device refused: the limit and what this
  // process holds.
  std::string refusal_context(DeviceObject kind) const;
  int held(DeviceObject kind) const;
  int limit(DeviceObject kind) const { return limits_[index(kind)]; }

 private:
  static size_t index(DeviceObject kind) { return static_cast<size_t>(kind); }
  std::string limit_text(DeviceObject kind) const;

  std::string device_name_;
  std::array<int, 3> limits_{};
  std::array<std::atomic<int>, 3> held_{};
};

// The completion entries one connection's queue pairs may need at once,
// against the device's max_cqe: empty where they fit, else the error.
std::string completion_depth_problem(const std::string& device_name, int queue_pairs,
                                     int entries_per_qp, int max_cqe);

}  // namespace weft::verbs
