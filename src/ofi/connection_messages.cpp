#include "ofi/connection_messages.h"

#include <cstring>

#include "ofi/tag_layout.h"

namespace weft::ofi {
namespace {

void put32(uint8_t* out, uint32_t value) {
  std::memcpy(out, &value, 4);
}
void put64(uint8_t* out, uint64_t value) {
  std::memcpy(out, &value, 8);
}
uint32_t get32(const uint8_t* in) {
  uint32_t value;
  std::memcpy(&value, in, 4);
  return value;
}
uint64_t get64(const uint8_t* in) {
  uint64_t value;
  std::memcpy(&value, in, 8);
  return value;
}

bool valid_comm_id(uint32_t id) {
  return id != 0 && id <= kMaxCommId;
}

}  // namespace

void encode_handle(const ListenHandle& handle, void* out) {
  auto* bytes = static_cast<uint8_t*>(out);
  std::memset(bytes, 0, kHandleSize);
  put32(bytes, kHandleMagic);
  bytes[4] = kWireVersion;
  bytes[5] = handle.address_size;
  put32(bytes + 8, handle.provider_hash);
  put32(bytes + 12, handle.listen_id);
  put64(bytes + 16, handle.connect_cookie);
  std::memcpy(bytes + kHandleHeaderSize, handle.address, handle.address_size);
}

bool decode_handle(const void* data, size_t size, ListenHandle* handle, std::string* error) {
  const auto* bytes = static_cast<const uint8_t*>(data);
  if (bytes == nullptr || size < kHandleSize) {
    *error = "handle is truncated (" + std::to_string(size) + " of " + std::to_string(kHandleSize) +
             " bytes)";
    return false;
  }
  if (get32(bytes) != kHandleMagic) {
    *error = "handle is not a weft listen handle (bad magic)";
    return false;
  }
  if (bytes[4] != kWireVersion) {
    *error = "handle has wire version " + std::to_string(bytes[4]) + ", this weft speaks " +
             std::to_string(kWireVersion) + " (mixed weft versions across nodes?)";
    return false;
  }
  if (bytes[5] == 0 || bytes[5] > kMaxAddressSize) {
    *error = "handle carries an invalid address size " + std::to_string(bytes[5]);
    return false;
  }
  ListenHandle decoded;
  decoded.address_size = bytes[5];
  decoded.provider_hash = get32(bytes + 8);
  decoded.listen_id = get32(bytes + 12);
  decoded.connect_cookie = get64(bytes + 16);
  if (!valid_comm_id(decoded.listen_id)) {
    *error = "handle carries an invalid listen id";
    return false;
  }
  std::memcpy(decoded.address, bytes + kHandleHeaderSize, decoded.address_size);
  *handle = decoded;
  return true;
}

void store_connect_cookie(void* handle_bytes, uint64_t cookie) {
  put64(static_cast<uint8_t*>(handle_bytes) + 16, cookie);
}

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

uint32_t hash_name(const std::string& text) {
  uint32_t hash = 2166136261u;
  for (unsigned char c : text) {
    hash ^= c;
    hash *= 16777619u;
  }
  return hash;
}

}  // namespace weft::ofi
