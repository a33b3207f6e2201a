// What every entry point does first: no exception crosses the C ABI, and a
// pointer NCCL hands back is checked to be the kind of object it should be.
#pragma once

#include <exception>
#include <new>

#include "weft/log.h"
#include "weft/transport.h"

namespace weft::abi {

// Runs `body`, converting any exception into an error NCCL can report.
template <typename Body>
ncclResult_t guarded(const char* what, Body&& body) noexcept {
  try {
    return body();
  } catch (const std::bad_alloc&) {
    WEFT_WARN("%s: out of memory", what);
    return ncclSystemError;
  } catch (const std::exception& e) {
    WEFT_WARN("%s: internal error: %s", what, e.what());
    return ncclInternalError;
  } catch (...) {
    WEFT_WARN("%s: unknown internal error", what);
    return ncclInternalError;
  }
}

template <typename T>
T* comm_as(void* comm, CommKind kind, const char* what) {
  auto* base = static_cast<Comm*>(comm);
  if (base == nullptr || base->kind() != kind) {
    WEFT_WARN("%s: invalid comm pointer %p", what, comm);
    return nullptr;
  }
  return static_cast<T*>(base);
}

}  // namespace weft::abi
