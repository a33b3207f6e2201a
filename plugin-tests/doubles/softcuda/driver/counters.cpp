// The counters behind the softcuda_* controls of softcuda.h.

#include "driver/counters.h"

namespace softcuda {

std::atomic<unsigned long long> g_flushes{0};
std::atomic<unsigned long long> g_total_allocations{0};
std::atomic<unsigned long long> g_dmabuf_exports{0};
std::atomic<unsigned long long> g_ipc_exports{0};
std::atomic<unsigned long long> g_ipc_opens{0};
std::atomic<unsigned long long> g_memcpy_count{0};
std::atomic<unsigned long long> g_memcpy_bytes{0};
std::atomic<unsigned long long> g_next_buffer_id{1};

}  // namespace softcuda
