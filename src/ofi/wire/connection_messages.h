// Bytes that travel between libfabric peers while a connection is set up:
// the listen handle's payload (its header is core's, core/handle_header.h),
// the connect request and its acknowledgement. Every decoder validates what it reads: these bytes
// come from outside the process. Little-endian (docs/wire-formats.md):
//
// Listen payload (1 + address size, + 32): 0 address size u8, 1 the
//   listener's libfabric address, then, where the listening process has
//   liveness links, its identity (core/peer_links.h, 32 bytes): the
//   connecting side watches that process while it waits for the answer.
// Request (160): 0 magic u32 "WFTC", 4 version u8, 5 address size u8,
//   6 protocol u8, 7 rails u8, 8 connector comm id u32, 12 the listener id
//   of the handle u32 (every request of an endpoint arrives at one tag,
//   ofi/endpoint/connect_inbox.h, and goes to the listener it names),
//   16 the listen handle's secret u64 (core/listen_secret.h), 24 address[96],
//   zero padded, 120 the connecting process's identity (core/peer_links.h,
//   32 bytes; token 0: no liveness link), 152 its link key u64 (0 exactly
//   when the token is).
// Ack (808): 0 magic u32 "WFTA", 4 version u8, 5 protocol u8, 6 flags u8
//   (1: size notices), 7 rails u8, 8 recv comm id u32, 12 rail 0's write
//   target u16, 14 zero u16, 16 eager size u32, 20 zero u32, 24 write
//   targets of rails 1..7 u16 x 7, 38 zero u16, 40 rails 1..7, 104 bytes
//   each: address size u8, zero[7], address[96], zero padded, 768 the
//   accepting process's identity (32 bytes), 800 its link key u64 (0
//   exactly when the token is). The link keys prove the liveness links'
//   hellos (peer_links.h): the request goes only to the listener its
//   handle names, the ack only to a connector that presented the secret.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "core/handle_header.h"
#include "core/peer_links.h"
#include "ofi/wire/rails.h"

namespace weft::ofi {

constexpr uint32_t kConnectMagic = 0x43544657;  // "WFTC"
constexpr uint32_t kAckMagic = 0x41544657;      // "WFTA"
// At least the rdma protocol's version (rdma_wire.cpp), so peers of
// different versions part at connect rather than mid-stream. 5: the
// request carries the listen secret; 6: both carry a link key; 7: the
// request names its listener and goes to the endpoint's connect inbox.
constexpr uint8_t kWireVersion = 7;

// The data protocol of a connection; both sides must use the same.
enum class Protocol : uint8_t { Tagged = 0, Rdma = 1 };
const char* protocol_name(Protocol protocol);
// The listener's address travels as the handle's payload.
constexpr size_t kMaxAddressSize = kMaxHandlePayload;  // 96 bytes

struct ListenPayload {
  uint8_t address_size = 0;
  uint8_t address[kMaxAddressSize] = {};
  PeerIdentity process;  // token 0: not in the handle
};
// The longest address a handle carries (its size byte first).
constexpr size_t kMaxListenAddress = kMaxHandlePayload - 1;
// Returns the payload's size; the identity goes in only where it fits.
size_t encode_listen_payload(const ListenPayload& payload, uint8_t* out);
bool decode_listen_payload(const uint8_t* bytes, size_t size, ListenPayload* payload,
                           std::string* error);

struct ConnectRequest {
  uint32_t listener_id = 0;  // the handle's: which listener of the endpoint
  uint32_t connector_comm_id = 0;
  uint64_t secret = 0;  // the listen handle's: the listener checks it first
  Protocol protocol = Protocol::Tagged;
  uint8_t rails = 1;  // rails the connecting side offers, 1..kMaxRails
  uint8_t address_size = 0;
  uint8_t address[kMaxAddressSize] = {};
  PeerIdentity process;   // for the liveness link
  uint64_t link_key = 0;  // what proves a hello to the connecting process
};
constexpr size_t kConnectRequestAddressOffset = 24;
constexpr size_t kConnectRequestKeyOffset =
    kConnectRequestAddressOffset + kMaxAddressSize + PeerIdentity::kPackedSize;
constexpr size_t kConnectRequestSize = kConnectRequestKeyOffset + 8;
void encode_connect_request(const ConnectRequest& request, uint8_t* out);
bool decode_connect_request(const uint8_t* bytes, size_t size, ConnectRequest* request,
                            std::string* error);

struct ConnectAck {
  uint32_t recv_comm_id = 0;
  Protocol protocol = Protocol::Tagged;
  // Rails the connection uses (at most what the request offered): data
  // written on rail r goes to the receiver's endpoint named by address[r]
  // (rail 0: the listener's, already known from the handle).
  uint8_t rails = 1;
  // RDMA protocol: the receiver's immediate target per rail and its eager
  // buffer size.
  uint16_t write_target[kMaxRails] = {};
  uint32_t eager_size = 0;
  // This side's write completions carry no length: send size notices.
  bool needs_size_notices = false;
  uint8_t address_size[kMaxRails] = {};
  uint8_t address[kMaxRails][kMaxAddressSize] = {};
  PeerIdentity process;   // for the liveness link
  uint64_t link_key = 0;  // what proves a hello to the accepting process
};
constexpr size_t kAckRailStride = 8 + kMaxAddressSize;
constexpr size_t kAckIdentityOffset = 40 + (kMaxRails - 1) * kAckRailStride;
constexpr size_t kAckKeyOffset = kAckIdentityOffset + PeerIdentity::kPackedSize;
constexpr size_t kConnectAckSize = kAckKeyOffset + 8;
void encode_connect_ack(const ConnectAck& ack, uint8_t* out);
bool decode_connect_ack(const uint8_t* bytes, size_t size, ConnectAck* ack, std::string* error);

}  // namespace weft::ofi
