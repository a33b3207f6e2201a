// A random 64-bit value that is never 0 (getrandom, else the clock and an
// address): tokens and names that tell processes and loads apart.
#pragma once

#include <cstdint>

namespace weft {

uint64_t random_nonzero_u64();
// The kernel's random bytes only (never 0): false when getrandom cannot
// give them, for secrets that must not fall back to a guessable value.
bool kernel_random_nonzero_u64(uint64_t* out);

}  // namespace weft
