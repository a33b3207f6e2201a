// The transports weft can run on, one entry each, in the order
// WEFT_TRANSPORT=auto tries them. Adding a transport is adding an entry
// here (docs/extending.md): its name (a WEFT_TRANSPORT value), its wire ids
// (core/transport_id.h), whether `auto` takes it on this node, and how it
// opens. Each transport answers `auto` itself (its folder knows what its
// devices look like); this table only orders them and logs the answers.
#pragma once

#include <memory>
#include <span>
#include <string>

#include "core/transport_id.h"
#include "weft/params.h"
#include "weft/transport.h"

namespace weft {

struct TransportEntry {
  const char* name;     // WEFT_TRANSPORT value, Transport::name()
  const char* library;  // what it drives, for the log
  TransportId net_wire_id;
  TransportId one_sided_wire_id;
  // Null where this weft was built without it; `not_built` says what to install.
  AutoChoice (*auto_choice)(const Params&);
  ncclResult_t (*create)(const Params&, std::unique_ptr<Transport>*);
  const char* not_built;
};

// Every transport weft knows, built or not, in auto's order.
std::span<const TransportEntry> transport_table();

// Picks and opens the transport the parameters ask for. On failure logs why
// (what was found, which variable to set) and returns an error.
ncclResult_t make_transport(const Params& params, std::unique_ptr<Transport>* out);

}  // namespace weft
