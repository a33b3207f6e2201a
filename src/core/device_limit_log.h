// The device limits weft-info --check reads back from weft's log at init:
// one INFO line per device, "device limit NAME: memory regions N (SOURCE)"
// ("not stated" for N where the device gives none).
#pragma once

#include <string>

namespace weft {

// `count` < 0: the device states none.
void log_memory_region_limit(const std::string& device, long long count, const char* source);

}  // namespace weft
