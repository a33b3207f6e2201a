// Whether cuInit has succeeded in this process.

#include "driver/init.h"

#include <atomic>

namespace softcuda {

namespace {

std::atomic<bool> g_initialized{false};

}  // namespace

bool initialized() {
  return g_initialized.load(std::memory_order_acquire);
}

void set_initialized() {
  g_initialized.store(true, std::memory_order_release);
}

}  // namespace softcuda
