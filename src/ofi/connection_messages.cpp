#include "ofi/connection_messages.h"

#include <cstring>

#include "core/comm_id.h"

namespace weft::ofi {
namespace {

void put32(uint8_t* out, uint32_t value) {
  std::memcpy(out, &value, 4);
}
uint32_t get32(const uint8_t* in) {
  uint32_t value;
  std::memcpy(&value, in, 4);
  return value;
}

}  // namespace

void encode_connect_request(const ConnectRequest& request, uint8_t* out) {
  std::memset(out, 0, kConnectRequestSize);
  put32(out, kConnectMagic);
  out[4] = kWireVersion;
  out[5] = request.address_size;
  put32(out + 8, request.connector_comm_id);
  std::memcpy(out + 16, request.address, request.address_size);
}

bool decode_connect_request(const uint8_t* bytes, size_t size, ConnectRequest* request,
                            std::string* error) {
  if (size < kConnectRequestSize) {
    *error = "connect request is truncated (" + std::to_string(size) + " bytes)";
    return false;
  }
  if (get32(bytes) != kConnectMagic || bytes[4] != kWireVersion) {
    *error = "connect request has a bad magic or wire version";
    return false;
  }
  ConnectRequest decoded;
  decoded.address_size = bytes[5];
  decoded.connector_comm_id = get32(bytes + 8);
  if (decoded.address_size == 0 || decoded.address_size > kMaxAddressSize) {
    *error =
        "connect request carries an invalid address size " + std::to_string(decoded.address_size);
    return false;
  }
  if (!valid_comm_id(decoded.connector_comm_id)) {
    *error = "connect request carries an invalid comm id";
    return false;
  }
  std::memcpy(decoded.address, bytes + 16, decoded.address_size);
  *request = decoded;
  return true;
}

void encode_connect_ack(const ConnectAck& ack, uint8_t* out) {
  std::memset(out, 0, kConnectAckSize);
  put32(out, kAckMagic);
  out[4] = kWireVersion;
  put32(out + 8, ack.recv_comm_id);
}

bool decode_connect_ack(const uint8_t* bytes, size_t size, ConnectAck* ack, std::string* error) {
  if (size < kConnectAckSize) {
    *error = "connect acknowledgement is truncated (" + std::to_string(size) + " bytes)";
    return false;
  }
  if (get32(bytes) != kAckMagic || bytes[4] != kWireVersion) {
    *error = "connect acknowledgement has a bad magic or wire version";
    return false;
  }
  ConnectAck decoded;
  decoded.recv_comm_id = get32(bytes + 8);
  if (!valid_comm_id(decoded.recv_comm_id)) {
    *error = "connect acknowledgement carries an invalid comm id";
    return false;
  }
  *ack = decoded;
  return true;
}

}  // namespace weft::ofi
