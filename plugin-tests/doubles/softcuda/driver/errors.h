// The driver's error codes, with their names and messages.
#pragma once

#include "cuda_abi.h"

namespace softcuda {

struct ErrorInfo {
  int code;
  const char* name;
  const char* text;
};

// nullptr for a code the driver does not have.
const ErrorInfo* find_error(int code);
const char* error_name(CUresult r);

}  // namespace softcuda
