// Comm and listener ids: what a peer puts on the wire to name one of our
// comms. 31 bits, never 0, so a transport may use the top bit of a 32-bit
// field (libfabric tags, verbs immediates) for itself.
#pragma once

#include <cstdint>

namespace weft {

constexpr uint32_t kMaxCommId = 0x7fffffffu;

constexpr bool valid_comm_id(uint32_t id) {
  return id != 0 && id <= kMaxCommId;
}

}  // namespace weft
