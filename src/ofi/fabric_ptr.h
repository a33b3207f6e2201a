// RAII for libfabric objects: fi_close on destruction.
#pragma once

#include <rdma/fabric.h>

#include <memory>

namespace weft::ofi {

struct FidCloser {
  template <typename T>
  void operator()(T* object) const {
    if (object != nullptr) fi_close(&object->fid);
  }
};

template <typename T>
using FabricPtr = std::unique_ptr<T, FidCloser>;

struct InfoDeleter {
  void operator()(fi_info* info) const { fi_freeinfo(info); }
};
using InfoPtr = std::unique_ptr<fi_info, InfoDeleter>;

}  // namespace weft::ofi
