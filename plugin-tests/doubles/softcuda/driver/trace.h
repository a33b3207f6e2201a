// One per API call: formats the arguments when SOFTCUDA_LOG=1 and logs them
// with the result when the call returns through operator().
#pragma once

#include <cstdarg>
#include <cstdio>

#include "cuda_abi.h"
#include "driver/config.h"
#include "driver/errors.h"

namespace softcuda {

class Trace {
 public:
  explicit Trace(const char* name) : on_(env_flag("SOFTCUDA_LOG", false)), name_(name) {
    args_[0] = '\0';
  }
  Trace(const char* name, const char* fmt, ...) __attribute__((format(printf, 3, 4)))
  : on_(env_flag("SOFTCUDA_LOG", false)), name_(name) {
    args_[0] = '\0';
    if (!on_) return;
    va_list ap;
    va_start(ap, fmt);
    std::vsnprintf(args_, sizeof(args_), fmt, ap);
    va_end(ap);
  }
  CUresult operator()(CUresult r) const {
    if (on_) std::fprintf(stderr, "softcuda: %s(%s) = %s\n", name_, args_, error_name(r));
    return r;
  }

 private:
  bool on_;
  const char* name_;
  char args_[256];
};

}  // namespace softcuda
