// How the environment configures the driver double: devices, versions and
// features, read at each call (so a test may setenv between calls).
#pragma once

#include <cstddef>

#include "cuda_abi.h"

namespace softcuda {

constexpr int kMaxDevices = 16;
constexpr int kDefaultDriverVersion = 13000;

long env_long(const char* name, long fallback);
bool env_flag(const char* name, bool fallback);
int device_count();
int driver_version();
bool gdr_supported();
bool dmabuf_supported();
// cuPointerSetAttribute(SYNC_MEMOPS) allowed (SOFTCUDA_SYNC_MEMOPS).
bool sync_memops_supported();
bool valid_device(CUdevice dev);
size_t page_size();
size_t round_up_pages(size_t n);

}  // namespace softcuda
