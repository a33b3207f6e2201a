// Bytes that travel between libfabric peers while a connection is set up:
// the connect request and its acknowledgement (the listen handle is core's,
// core/handle_header.h). Every decoder validates what it reads: these bytes
// come from outside the process.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "core/handle_header.h"

namespace weft::ofi {

constexpr uint32_t kConnectMagic = 0x43544657;  // "WFTC"
constexpr uint32_t kAckMagic = 0x41544657;      // "WFTA"
constexpr uint8_t kWireVersion = 2;

// The data protocol of a connection; both sides must use the same.
enum class Protocol : uint8_t { Tagged = 0, Rdma = 1 };
const char* protocol_name(Protocol protocol);
// The listener's address travels as the handle's payload.
constexpr size_t kMaxAddressSize = kMaxHandlePayload;  // 104 bytes

struct ConnectRequest {
  uint32_t connector_comm_id = 0;
  Protocol protocol = Protocol::Tagged;
  uint8_t address_size = 0;
  uint8_t address[kMaxAddressSize] = {};
};
constexpr size_t kConnectRequestSize = 16 + kMaxAddressSize;
void encode_connect_request(const ConnectRequest& request, uint8_t* out);
bool decode_connect_request(const uint8_t* bytes, size_t size, ConnectRequest* request,
                            std::string* error);

struct ConnectAck {
  uint32_t recv_comm_id = 0;
  Protocol protocol = Protocol::Tagged;
  // RDMA protocol: the receiver's immediate target and eager buffer size.
  uint16_t write_target = 0;
  uint32_t eager_size = 0;
  // This side's write completions carry no length: send size notices.
  bool needs_size_notices = false;
};
constexpr size_t kConnectAckSize = 24;
void encode_connect_ack(const ConnectAck& ack, uint8_t* out);
bool decode_connect_ack(const uint8_t* bytes, size_t size, ConnectAck* ack, std::string* error);

}  // namespace weft::ofi
