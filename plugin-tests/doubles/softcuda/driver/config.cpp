// How the environment configures the driver double: devices, versions and
// features, read at each call.

#include "driver/config.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>

namespace softcuda {

long env_long(const char* name, long fallback) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return fallback;
  char* end = nullptr;
  long x = std::strtol(v, &end, 0);
  return (end == nullptr || *end != '\0') ? fallback : x;
}

bool env_flag(const char* name, bool fallback) {
  return env_long(name, fallback ? 1 : 0) != 0;
}

int device_count() {
  return static_cast<int>(std::clamp(env_long("SOFTCUDA_DEVICES", 1), 0L, 16L));
}
int driver_version() {
  return static_cast<int>(env_long("SOFTCUDA_DRIVER_VERSION", kDefaultDriverVersion));
}
bool gdr_supported() {
  return env_flag("SOFTCUDA_GDR", true);
}
bool dmabuf_supported() {
  return env_flag("SOFTCUDA_DMABUF", true);
}
bool sync_memops_supported() {
  return env_flag("SOFTCUDA_SYNC_MEMOPS", true);
}
bool valid_device(CUdevice dev) {
  return dev >= 0 && dev < device_count();
}

size_t page_size() {
  static const size_t size = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return size;
}
size_t round_up_pages(size_t n) {
  return (n + page_size() - 1) / page_size() * page_size();
}

}  // namespace softcuda
