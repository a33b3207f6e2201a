// Whether cuInit has succeeded in this process.
#pragma once

namespace softcuda {

bool initialized();
void set_initialized();

}  // namespace softcuda
