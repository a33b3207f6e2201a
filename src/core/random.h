// A random 64-bit value that is never 0 (getrandom, else the clock and an
// address): tokens and names that tell processes and loads apart.
#pragma once

#include <cstdint>

namespace weft {

uint64_t random_nonzero_u64();

}  // namespace weft
