#include "core/random.h"

#include <sys/random.h>

#include <chrono>

namespace weft {

uint64_t random_nonzero_u64() {
  uint64_t value = 0;
  while (value == 0) {
    if (getrandom(&value, sizeof(value), 0) != static_cast<ssize_t>(sizeof(value))) {
      // No entropy source: time and an address still tell processes apart.
      value = static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count()) ^
              reinterpret_cast<uintptr_t>(&value);
    }
  }
  return value;
}

}  // namespace weft
