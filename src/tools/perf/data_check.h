// Payload patterns: 64-bit words from a splitmix64 stream keyed by (sending
// rank, message size, slot). Cheap to generate (vectorizes), and a message
// landing in the wrong slot, at the wrong offset, from an older size step or
// truncated shows up as a mismatch.
#pragma once

#include <cstddef>
#include <cstdint>

namespace weft::perf {

uint64_t pattern_key(int sender_rank, size_t size, size_t slot);
void fill_pattern(void* buf, size_t size, uint64_t key);
// Offset of the first differing byte, or SIZE_MAX when all match.
size_t find_mismatch(const void* buf, size_t size, uint64_t key);
// The same for the part of a message that starts `at` bytes into it (a
// multiple of 8), for messages handled in pieces (GPU memory through a host
// staging buffer). find_mismatch_at returns an offset into `buf`.
void fill_pattern_at(void* buf, size_t len, uint64_t key, size_t at);
size_t find_mismatch_at(const void* buf, size_t len, uint64_t key, size_t at);
// Expected byte at `offset` (for error messages).
uint8_t expected_byte(uint64_t key, size_t offset);
// Overwrites a receive slot so stale data cannot pass the check.
void poison(void* buf, size_t size);

}  // namespace weft::perf
