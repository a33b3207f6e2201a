// The counters behind the softcuda_* controls of softcuda.h.
#pragma once

#include <atomic>

namespace softcuda {

extern std::atomic<unsigned long long> g_flushes;
extern std::atomic<unsigned long long> g_total_allocations;
extern std::atomic<unsigned long long> g_dmabuf_exports;
extern std::atomic<unsigned long long> g_ipc_exports;
extern std::atomic<unsigned long long> g_ipc_opens;
extern std::atomic<unsigned long long> g_memcpy_count;
extern std::atomic<unsigned long long> g_memcpy_bytes;
// Not a counter a test reads: the CU_POINTER_ATTRIBUTE_BUFFER_ID of the next
// allocation.
extern std::atomic<unsigned long long> g_next_buffer_id;

}  // namespace softcuda
