#include "core/transport_id.h"

namespace weft {

const char* transport_id_name(TransportId id) {
  switch (id) {
    case TransportId::Ofi:
      return "ofi (libfabric)";
    case TransportId::Verbs:
      return "verbs";
    case TransportId::OfiRma:
      return "ofi (libfabric) one-sided";
    case TransportId::VerbsRma:
      return "verbs one-sided";
  }
  return "unknown";
}

}  // namespace weft
