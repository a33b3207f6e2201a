// The listen handle NCCL copies between peers (128 bytes, no pointers): a
// header every weft transport shares, then the transport's own payload (a
// libfabric address, a side-channel address). A handle made by another
// transport, another weft wire version or something that is not weft is
// refused by name before any of its payload is used.
//
//   0  magic u32 "WFT2"     4  wire version u8     5  transport id u8
//   6  payload size u8      7  reserved u8 (0)     8  fingerprint u32
//   12 listen id u32        16 connect cookie u64  24 secret u64 (not 0)
//   32 payload[96], zero padded
//
// Wire version 3 added the secret (core/listen_secret.h); 2 had none. 4:
// the libfabric payload names its address's size and may carry the
// listening process's identity (ofi/wire/connection_messages.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "core/transport_id.h"
#include "weft/transport.h"

namespace weft {

constexpr uint32_t kHandleMagic = 0x32544657;     // "WFT2"
constexpr uint32_t kOldHandleMagic = 0x31544657;  // "WFT1": weft before the shared header
constexpr uint8_t kHandleWireVersion = 4;
constexpr size_t kHandleHeaderSize = 32;
constexpr size_t kMaxHandlePayload = kHandleSize - kHandleHeaderSize;  // 96 bytes

struct ListenHandle {
  TransportId transport = TransportId::Ofi;
  uint32_t fingerprint = 0;     // what must match on both sides (provider, address format)
  uint32_t listen_id = 0;       // 1..kMaxCommId
  uint64_t connect_cookie = 0;  // scratch for the connecting side, 0 when fresh
  uint64_t secret = 0;          // the listen comm's (listen_secret.h), never 0
  uint8_t payload_size = 0;     // 1..kMaxHandlePayload
  uint8_t payload[kMaxHandlePayload] = {};
};

void encode_handle(const ListenHandle& handle, void* out);
// Returns false and explains in `error` when the bytes are not a handle of
// `expected`'s transport and this wire version.
bool decode_handle(const void* bytes, size_t size, TransportId expected, ListenHandle* handle,
                   std::string* error);
// Rewrites only the cookie of an encoded handle.
void store_connect_cookie(void* handle_bytes, uint64_t cookie);

}  // namespace weft
