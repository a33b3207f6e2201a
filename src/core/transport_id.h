// Which transport made a listen handle: byte 5 of every handle
// (handle_header.h), so a handle from another transport is refused by name.
// A wire value: never renumber one; a new transport takes the next numbers
// (abi/transport_table.h lists each transport's ids).
#pragma once

#include <cstdint>

namespace weft {

// OfiRma, VerbsRma: a one-sided comm's listener on each transport.
enum class TransportId : uint8_t { Ofi = 1, Verbs = 2, OfiRma = 3, VerbsRma = 4 };
const char* transport_id_name(TransportId id);

}  // namespace weft
