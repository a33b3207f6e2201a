#include "core/handle_header.h"

#include <cstring>

#include "core/byte_codec.h"
#include "core/comm_id.h"

namespace weft {
namespace {

constexpr size_t kCookieOffset = 16;
constexpr size_t kSecretOffset = 24;

}  // namespace

void encode_handle(const ListenHandle& handle, void* out) {
  auto* bytes = static_cast<uint8_t*>(out);
  std::memset(bytes, 0, kHandleSize);
  put_le32(bytes, kHandleMagic);
  bytes[4] = kHandleWireVersion;
  bytes[5] = static_cast<uint8_t>(handle.transport);
  bytes[6] = handle.payload_size;
  put_le32(bytes + 8, handle.fingerprint);
  put_le32(bytes + 12, handle.listen_id);
  put_le64(bytes + kCookieOffset, handle.connect_cookie);
  put_le64(bytes + kSecretOffset, handle.secret);
  std::memcpy(bytes + kHandleHeaderSize, handle.payload, handle.payload_size);
}

bool decode_handle(const void* data, size_t size, TransportId expected, ListenHandle* handle,
                   std::string* error) {
  const auto* bytes = static_cast<const uint8_t*>(data);
  if (bytes == nullptr || size < kHandleSize) {
    *error = "handle is truncated (" + std::to_string(size) + " of " + std::to_string(kHandleSize) +
             " bytes)";
    return false;
  }
  uint32_t magic = get_le32(bytes);
  if (magic == kOldHandleMagic) {
    *error = "handle comes from an older weft (wire version 1); use the same weft on every node";
    return false;
  }
  if (magic != kHandleMagic) {
    *error = "handle is not a weft listen handle (bad magic)";
    return false;
  }
  if (bytes[4] != kHandleWireVersion) {
    *error = "handle has wire version " + std::to_string(bytes[4]) + ", this weft speaks " +
             std::to_string(kHandleWireVersion) + " (mixed weft versions across nodes?)";
    return false;
  }
  auto transport = static_cast<TransportId>(bytes[5]);
  if (transport != TransportId::Ofi && transport != TransportId::Verbs &&
      transport != TransportId::OfiRma && transport != TransportId::VerbsRma) {
    *error = "handle names an unknown weft transport " + std::to_string(bytes[5]);
    return false;
  }
  if (transport != expected) {
    *error = std::string("handle comes from weft's ") + transport_id_name(transport) +
             " transport, this process uses " + transport_id_name(expected) +
             " (set the same WEFT_TRANSPORT on every node)";
    return false;
  }
  uint8_t payload_size = bytes[6];
  if (payload_size == 0 || payload_size > kMaxHandlePayload) {
    *error = "handle carries an invalid payload size " + std::to_string(payload_size);
    return false;
  }
  bool padding_clear = bytes[7] == 0;
  for (size_t i = kHandleHeaderSize + payload_size; i < kHandleSize; ++i) {
    padding_clear = padding_clear && bytes[i] == 0;
  }
  if (!padding_clear) {
    *error = "handle has non-zero reserved bytes (corrupted in transit?)";
    return false;
  }
  ListenHandle decoded;
  decoded.transport = transport;
  decoded.payload_size = payload_size;
  decoded.fingerprint = get_le32(bytes + 8);
  decoded.listen_id = get_le32(bytes + 12);
  decoded.connect_cookie = get_le64(bytes + kCookieOffset);
  decoded.secret = get_le64(bytes + kSecretOffset);
  if (!valid_comm_id(decoded.listen_id)) {
    *error = "handle carries an invalid listen id";
    return false;
  }
  if (decoded.secret == 0) {
    *error = "handle carries no listen secret";
    return false;
  }
  std::memcpy(decoded.payload, bytes + kHandleHeaderSize, payload_size);
  *handle = decoded;
  return true;
}

void store_connect_cookie(void* handle_bytes, uint64_t cookie) {
  put_le64(static_cast<uint8_t*>(handle_bytes) + kCookieOffset, cookie);
}

}  // namespace weft
