// Stable C strings for the char* fields NCCL keeps from getProperties.
#pragma once

#include <string>

namespace weft::abi {

// Returns a pointer that stays valid for the life of the process; equal
// strings share storage so repeated getProperties calls do not grow it.
char* intern_string(const std::string& text);

}  // namespace weft::abi
