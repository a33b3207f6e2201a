#include "ofi/wire/connection_messages.h"

#include <cstring>

#include "core/byte_codec.h"
#include "core/comm_id.h"

namespace weft::ofi {
namespace {

bool decode_protocol(uint8_t value, Protocol* protocol) {
  if (value > static_cast<uint8_t>(Protocol::Rdma)) return false;
  *protocol = static_cast<Protocol>(value);
  return true;
}

// A liveness identity comes with its link key, and only with it.
bool key_matches_identity(const char* what, const PeerIdentity& process, uint64_t link_key,
                          std::string* error) {
  if ((process.token == 0) == (link_key == 0)) return true;
  *error = std::string(what) + (link_key == 0 ? " offers a liveness link without a link key"
                                              : " carries a link key without a liveness link");
  return false;
}

std::string version_mismatch(const char* what, uint8_t version) {
  return std::string(what) + " has wire version " + std::to_string(version) +
         ", this weft speaks " + std::to_string(kWireVersion) +
         " (mixed weft versions across nodes?)";
}

}  // namespace

const char* protocol_name(Protocol protocol) {
  return protocol == Protocol::Rdma ? "rdma" : "tagged";
}

size_t encode_listen_payload(const ListenPayload& payload, uint8_t* out) {
  std::memset(out, 0, kMaxHandlePayload);
  out[0] = payload.address_size;
  std::memcpy(out + 1, payload.address, payload.address_size);
  size_t size = 1 + size_t{payload.address_size};
  if (payload.process.token != 0 && size + PeerIdentity::kPackedSize <= kMaxHandlePayload) {
    payload.process.pack(out + size);
    size += PeerIdentity::kPackedSize;
  }
  return size;
}

bool decode_listen_payload(const uint8_t* bytes, size_t size, ListenPayload* payload,
                           std::string* error) {
  if (size < 2 || bytes[0] == 0 || bytes[0] > kMaxListenAddress) {
    *error = "listen handle carries no valid address";
    return false;
  }
  ListenPayload decoded;
  decoded.address_size = bytes[0];
  const size_t address_end = 1 + size_t{decoded.address_size};
  if (size != address_end && size != address_end + PeerIdentity::kPackedSize) {
    *error = "listen handle's payload of " + std::to_string(size) + " bytes does not hold a " +
             std::to_string(decoded.address_size) + "-byte address (and a process identity)";
    return false;
  }
  std::memcpy(decoded.address, bytes + 1, decoded.address_size);
  if (size > address_end) {
    if (!PeerIdentity::unpack(bytes + address_end, PeerIdentity::kPackedSize, &decoded.process,
                              error)) {
      *error = "listen handle: " + *error;
      return false;
    }
    if (decoded.process.token == 0) {
      *error = "listen handle carries an empty process identity";
      return false;
    }
  }
  *payload = decoded;
  return true;
}

void encode_connect_request(const ConnectRequest& request, uint8_t* out) {
  std::memset(out, 0, kConnectRequestSize);
  put_le32(out, kConnectMagic);
  out[4] = kWireVersion;
  out[5] = request.address_size;
  out[6] = static_cast<uint8_t>(request.protocol);
  out[7] = request.rails;
  put_le32(out + 8, request.connector_comm_id);
  put_le32(out + 12, request.listener_id);
  put_le64(out + 16, request.secret);
  std::memcpy(out + kConnectRequestAddressOffset, request.address, request.address_size);
  request.process.pack(out + kConnectRequestAddressOffset + kMaxAddressSize);
  put_le64(out + kConnectRequestKeyOffset, request.link_key);
}

bool decode_connect_request(const uint8_t* bytes, size_t size, ConnectRequest* request,
                            std::string* error) {
  if (size < kConnectRequestSize) {
    *error = "connect request is truncated (" + std::to_string(size) + " bytes)";
    return false;
  }
  if (get_le32(bytes) != kConnectMagic) {
    *error = "connect request has a bad magic";
    return false;
  }
  if (bytes[4] != kWireVersion) {
    *error = version_mismatch("connect request", bytes[4]);
    return false;
  }
  ConnectRequest decoded;
  decoded.address_size = bytes[5];
  decoded.rails = bytes[7];
  decoded.connector_comm_id = get_le32(bytes + 8);
  if (decoded.rails < 1 || decoded.rails > kMaxRails) {
    *error = "connect request offers " + std::to_string(decoded.rails) + " rails (1.." +
             std::to_string(kMaxRails) + ")";
    return false;
  }
  if (!decode_protocol(bytes[6], &decoded.protocol)) {
    *error = "connect request names unknown protocol " + std::to_string(bytes[6]);
    return false;
  }
  if (decoded.address_size == 0 || decoded.address_size > kMaxAddressSize) {
    *error =
        "connect request carries an invalid address size " + std::to_string(decoded.address_size);
    return false;
  }
  if (!valid_comm_id(decoded.connector_comm_id)) {
    *error = "connect request carries an invalid comm id";
    return false;
  }
  decoded.listener_id = get_le32(bytes + 12);
  if (!valid_comm_id(decoded.listener_id)) {
    *error = "connect request names an invalid listener id";
    return false;
  }
  decoded.secret = get_le64(bytes + 16);
  const uint8_t* address = bytes + kConnectRequestAddressOffset;
  for (size_t i = decoded.address_size; i < kMaxAddressSize; ++i) {
    if (address[i] != 0) {
      *error = "connect request has non-zero bytes beyond its address";
      return false;
    }
  }
  std::memcpy(decoded.address, address, decoded.address_size);
  if (!PeerIdentity::unpack(address + kMaxAddressSize, PeerIdentity::kPackedSize, &decoded.process,
                            error)) {
    *error = "connect request: " + *error;
    return false;
  }
  decoded.link_key = get_le64(bytes + kConnectRequestKeyOffset);
  if (!key_matches_identity("connect request", decoded.process, decoded.link_key, error))
    return false;
  *request = decoded;
  return true;
}

void encode_connect_ack(const ConnectAck& ack, uint8_t* out) {
  std::memset(out, 0, kConnectAckSize);
  put_le32(out, kAckMagic);
  out[4] = kWireVersion;
  out[5] = static_cast<uint8_t>(ack.protocol);
  out[6] = ack.needs_size_notices ? 1 : 0;
  out[7] = ack.rails;
  put_le32(out + 8, ack.recv_comm_id);
  put_le16(out + 12, ack.write_target[0]);
  put_le32(out + 16, ack.eager_size);
  for (int r = 1; r < ack.rails && r < kMaxRails; ++r) {
    put_le16(out + 24 + 2 * (r - 1), ack.write_target[r]);
    uint8_t* rail = out + 40 + (r - 1) * kAckRailStride;
    rail[0] = ack.address_size[r];
    std::memcpy(rail + 8, ack.address[r], ack.address_size[r]);
  }
  ack.process.pack(out + kAckIdentityOffset);
  put_le64(out + kAckKeyOffset, ack.link_key);
}

bool decode_connect_ack(const uint8_t* bytes, size_t size, ConnectAck* ack, std::string* error) {
  if (size < kConnectAckSize) {
    *error = "connect acknowledgement is truncated (" + std::to_string(size) + " bytes)";
    return false;
  }
  if (get_le32(bytes) != kAckMagic) {
    *error = "connect acknowledgement has a bad magic";
    return false;
  }
  if (bytes[4] != kWireVersion) {
    *error = version_mismatch("connect acknowledgement", bytes[4]);
    return false;
  }
  ConnectAck decoded;
  decoded.recv_comm_id = get_le32(bytes + 8);
  if (!valid_comm_id(decoded.recv_comm_id)) {
    *error = "connect acknowledgement carries an invalid comm id";
    return false;
  }
  if (!decode_protocol(bytes[5], &decoded.protocol)) {
    *error = "connect acknowledgement names unknown protocol " + std::to_string(bytes[5]);
    return false;
  }
  if (bytes[6] > 1) {
    *error = "connect acknowledgement has unknown flags";
    return false;
  }
  decoded.needs_size_notices = bytes[6] == 1;
  decoded.rails = bytes[7];
  if (decoded.rails < 1 || decoded.rails > kMaxRails) {
    *error = "connect acknowledgement names " + std::to_string(decoded.rails) + " rails (1.." +
             std::to_string(kMaxRails) + ")";
    return false;
  }
  decoded.eager_size = get_le32(bytes + 16);
  if (bytes[14] != 0 || bytes[15] != 0 || get_le32(bytes + 20) != 0 || bytes[38] != 0 ||
      bytes[39] != 0) {
    *error = "connect acknowledgement has non-zero reserved bytes";
    return false;
  }
  for (int r = 0; r < kMaxRails; ++r) {
    const uint8_t* target = r == 0 ? bytes + 12 : bytes + 24 + 2 * (r - 1);
    decoded.write_target[r] = get_le16(target);
    bool used = r < decoded.rails;
    if (used && decoded.protocol == Protocol::Rdma && decoded.write_target[r] == 0) {
      *error = "connect acknowledgement for the rdma protocol names no write target on rail " +
               std::to_string(r);
      return false;
    }
    if (r == 0) continue;
    const uint8_t* rail = bytes + 40 + (r - 1) * kAckRailStride;
    uint8_t address_size = rail[0];
    if (used && (address_size == 0 || address_size > kMaxAddressSize)) {
      *error = "connect acknowledgement carries an invalid address size " +
               std::to_string(address_size) + " for rail " + std::to_string(r);
      return false;
    }
    bool padding_clear = true;
    for (int i = 1; i < 8; ++i) padding_clear = padding_clear && rail[i] == 0;
    for (size_t i = used ? address_size : 0; i < kMaxAddressSize; ++i) {
      padding_clear = padding_clear && rail[8 + i] == 0;
    }
    if (!used && (decoded.write_target[r] != 0 || address_size != 0)) padding_clear = false;
    if (!padding_clear) {
      *error = "connect acknowledgement has non-zero bytes beyond rail " + std::to_string(r) +
               "'s address";
      return false;
    }
    if (used) {
      decoded.address_size[r] = address_size;
      std::memcpy(decoded.address[r], rail + 8, address_size);
    }
  }
  if (!PeerIdentity::unpack(bytes + kAckIdentityOffset, PeerIdentity::kPackedSize, &decoded.process,
                            error)) {
    *error = "connect acknowledgement: " + *error;
    return false;
  }
  decoded.link_key = get_le64(bytes + kAckKeyOffset);
  if (!key_matches_identity("connect acknowledgement", decoded.process, decoded.link_key, error))
    return false;
  *ack = decoded;
  return true;
}

}  // namespace weft::ofi
