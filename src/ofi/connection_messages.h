// Bytes that travel between peers while a connection is set up: the
// listen handle (copied by NCCL through its bootstrap), the connect request
// and its acknowledgement. Every decoder validates what it reads: these
// bytes come from outside the process.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "weft/transport.h"

namespace weft::ofi {

constexpr uint32_t kHandleMagic = 0x31544657;   // "WFT1"
constexpr uint32_t kConnectMagic = 0x43544657;  // "WFTC"
constexpr uint32_t kAckMagic = 0x41544657;      // "WFTA"
constexpr uint8_t kWireVersion = 1;
constexpr size_t kHandleHeaderSize = 24;
constexpr size_t kMaxAddressSize = kHandleSize - kHandleHeaderSize;  // 104 bytes

struct ListenHandle {
  uint32_t provider_hash = 0;  // provider + address format of the listener
  uint32_t listen_id = 0;
  uint64_t connect_cookie = 0;  // scratch for the connecting side, 0 when fresh
  uint8_t address_size = 0;
  uint8_t address[kMaxAddressSize] = {};
};

// 128 bytes: magic u32, version u8, address_size u8, reserved u16,
// provider_hash u32, listen_id u32, connect_cookie u64, address[104].
void encode_handle(const ListenHandle& handle, void* out);
// Returns false and explains in `error` when the bytes are not a weft handle.
bool decode_handle(const void* bytes, size_t size, ListenHandle* handle, std::string* error);
// Rewrites only the cookie of an encoded handle.
void store_connect_cookie(void* handle_bytes, uint64_t cookie);

struct ConnectRequest {
  uint32_t connector_comm_id = 0;
  uint8_t address_size = 0;
  uint8_t address[kMaxAddressSize] = {};
};
constexpr size_t kConnectRequestSize = 16 + kMaxAddressSize;
void encode_connect_request(const ConnectRequest& request, uint8_t* out);
bool decode_connect_request(const uint8_t* bytes, size_t size, ConnectRequest* request,
                            std::string* error);

struct ConnectAck {
  uint32_t recv_comm_id = 0;
};
constexpr size_t kConnectAckSize = 16;
void encode_connect_ack(const ConnectAck& ack, uint8_t* out);
bool decode_connect_ack(const uint8_t* bytes, size_t size, ConnectAck* ack, std::string* error);

// Stable 32-bit hash (FNV-1a) used to tell providers apart in handles.
uint32_t hash_name(const std::string& text);

}  // namespace weft::ofi
