#include "core/device_limit_log.h"

#include "weft/log.h"

namespace weft {

void log_memory_region_limit(const std::string& device, long long count, const char* source) {
  const std::string amount = count < 0 ? "not stated" : std::to_string(count);
  WEFT_INFO(NCCL_INIT, "device limit %s: memory regions %s (%s)", device.c_str(), amount.c_str(),
            source);
}

}  // namespace weft
