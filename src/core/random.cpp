#include "core/random.h"

#include <sys/random.h>

#include <cerrno>
#include <chrono>

namespace weft {

bool kernel_random_nonzero_u64(uint64_t* out) {
  uint64_t value = 0;
  while (value == 0) {
    // Blocks only until the kernel's pool is first initialised, at boot.
    ssize_t got = getrandom(&value, sizeof(value), 0);
    if (got == static_cast<ssize_t>(sizeof(value))) continue;
    if (got < 0 && errno == EINTR) continue;
    return false;
  }
  *out = value;
  return true;
}

uint64_t random_nonzero_u64() {
  uint64_t value = 0;
  if (kernel_random_nonzero_u64(&value)) return value;
  // No entropy source: time and an address still tell processes apart.
  while (value == 0) {
    value = static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count()) ^
            reinterpret_cast<uintptr_t>(&value);
  }
  return value;
}

}  // namespace weft
