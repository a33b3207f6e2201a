#include "core/flush_method.h"

namespace weft {

FlushMethod choose_flush(const std::string& setting, bool has_read, bool has_cuda_flush) {
  if (setting == "off") return FlushMethod::None;
  if (setting == "read") return has_read ? FlushMethod::Read : FlushMethod::None;
  if (setting == "cuda") return has_cuda_flush ? FlushMethod::Cuda : FlushMethod::None;
  if (has_read) return FlushMethod::Read;
  return has_cuda_flush ? FlushMethod::Cuda : FlushMethod::None;
}

}  // namespace weft
