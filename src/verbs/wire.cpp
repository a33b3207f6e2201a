#include "verbs/wire.h"

#include <cstring>

#include "core/byte_codec.h"

namespace weft::verbs {
namespace {

constexpr uint32_t kInfoMagic = 0x31435657;  // "WVC1"
// 2: the liveness identity at 128 (160 bytes in all). 3: the listen
// secret at 120. 4: the link key at 160 (168 bytes).
constexpr uint8_t kInfoVersion = 4;
constexpr uint8_t kFlagSplit = 1;
constexpr uint8_t kFlagAdaptiveRouting = 2;
constexpr uint8_t kFlagEce = 4;

// Layout: 0 magic u32, 4 version u8, 5 role u8, 6 link layer u8, 7 QP count
// u8, 8 MTU u8, 9 flags u8, 10 LID u16, 12 listen id u32, 16 GID[16],
// 32 FIFO address u64, 40 FIFO rkey u32, 44 zero u32, 48 QPN u32 x 16,
// 112 ECE vendor id u32, 116 ECE options u32 (both 0 without the ECE flag),
// 120 the listen handle's secret u64 (a sender's; 0 from a receiver),
// 128 liveness identity (PeerIdentity, 32), 160 the process's link key u64
// (0 exactly when the identity's token is; core/peer_links.h: a sender's
// goes only to the listener its handle names, a receiver's only to a
// sender that presented the secret). Little-endian.

bool fail(std::string* error, const std::string& text) {
  *error = text;
  return false;
}

const char* role_name(Role role) {
  return role == Role::Sender ? "sender" : role == Role::Receiver ? "receiver" : "one-sided rank";
}

bool all_zero(const uint8_t* bytes, size_t size) {
  for (size_t i = 0; i < size; ++i) {
    if (bytes[i] != 0) return false;
  }
  return true;
}

}  // namespace

void encode_listen_payload(const SocketAddress& hub, const PeerIdentity& process, uint32_t mailbox,
                           ListenHandle* handle) {
  hub.pack(handle->payload);
  handle->payload_size = SocketAddress::kPackedSize;
  if (mailbox == 0 || process.token == 0) return;
  process.pack(handle->payload + SocketAddress::kPackedSize);
  put_le32(handle->payload + SocketAddress::kPackedSize + PeerIdentity::kPackedSize, mailbox);
  handle->payload_size = kListenPayloadSize;
}

bool decode_listen_payload(const ListenHandle& handle, ListenPayload* out, std::string* error) {
  *out = ListenPayload{};
  if (handle.payload_size != SocketAddress::kPackedSize &&
      handle.payload_size != kListenPayloadSize) {
    *error = "verbs handle payload of " + std::to_string(handle.payload_size) + " bytes (" +
             std::to_string(SocketAddress::kPackedSize) + " or " +
             std::to_string(kListenPayloadSize) + " expected)";
    return false;
  }
  std::string problem;
  if (!SocketAddress::unpack(handle.payload, SocketAddress::kPackedSize, &out->hub, &problem)) {
    *error = "side-channel address: " + problem;
    return false;
  }
  if (handle.payload_size == SocketAddress::kPackedSize) return true;
  const uint8_t* rest = handle.payload + SocketAddress::kPackedSize;
  if (!PeerIdentity::unpack(rest, PeerIdentity::kPackedSize, &out->process, &problem)) {
    *error = problem;
    return false;
  }
  out->mailbox = get_le32(rest + PeerIdentity::kPackedSize);
  if (out->process.token == 0 || out->mailbox == 0) {
    *error = "a listener's link identity with token or mailbox 0";
    return false;
  }
  return true;
}

void encode_connection_info(const ConnectionInfo& info, uint8_t out[kConnectionInfoSize]) {
  std::memset(out, 0, kConnectionInfoSize);
  put_le32(out, kInfoMagic);
  out[4] = kInfoVersion;
  out[5] = static_cast<uint8_t>(info.role);
  out[6] = static_cast<uint8_t>(info.link_layer);
  out[7] = info.qp_count;
  out[8] = info.mtu;
  out[9] = static_cast<uint8_t>((info.split_data ? kFlagSplit : 0) |
                                (info.adaptive_routing ? kFlagAdaptiveRouting : 0) |
                                (info.ece ? kFlagEce : 0));
  put_le16(out + 10, info.lid);
  put_le32(out + 12, info.listen_id);
  std::memcpy(out + 16, info.gid, 16);
  put_le64(out + 32, info.fifo_address);
  put_le32(out + 40, info.fifo_rkey);
  for (int q = 0; q < kMaxQpsPerConnection; ++q) put_le32(out + 48 + 4 * q, info.qpn[q]);
  if (info.ece) {
    put_le32(out + 112, info.ece_vendor_id);
    put_le32(out + 116, info.ece_options);
  }
  put_le64(out + 120, info.secret);
  info.process.pack(out + 128);
  put_le64(out + 160, info.link_key);
}

bool decode_connection_info(const uint8_t* in, size_t size, Role expected, ConnectionInfo* info,
                            std::string* error) {
  if (size != kConnectionInfoSize) {
    return fail(error, "connection info of " + std::to_string(size) + " bytes, expected " +
                           std::to_string(kConnectionInfoSize));
  }
  if (get_le32(in) != kInfoMagic) {
    return fail(error,
                "not a weft verbs connection (bad magic; is the peer weft's verbs "
                "transport, the same WEFT_TRANSPORT on every node?)");
  }
  if (in[4] != kInfoVersion) {
    return fail(error, "connection info version " + std::to_string(in[4]) + ", this weft speaks " +
                           std::to_string(kInfoVersion) + " (mixed weft versions?)");
  }
  ConnectionInfo decoded;
  if (in[5] != static_cast<uint8_t>(Role::Sender) &&
      in[5] != static_cast<uint8_t>(Role::Receiver) &&
      in[5] != static_cast<uint8_t>(Role::OneSided)) {
    return fail(error, "unknown role " + std::to_string(in[5]));
  }
  decoded.role = static_cast<Role>(in[5]);
  if (decoded.role != expected) {
    return fail(error, std::string("connection info from a ") + role_name(decoded.role) +
                           ", expected one from a " + role_name(expected));
  }
  if (in[6] != static_cast<uint8_t>(LinkLayer::InfiniBand) &&
      in[6] != static_cast<uint8_t>(LinkLayer::Ethernet)) {
    return fail(error, "unknown link layer " + std::to_string(in[6]));
  }
  decoded.link_layer = static_cast<LinkLayer>(in[6]);
  decoded.qp_count = in[7];
  if (decoded.qp_count < 1 || decoded.qp_count > kMaxQpsPerConnection) {
    return fail(error, "queue pair count " + std::to_string(decoded.qp_count) + ", must be 1.." +
                           std::to_string(kMaxQpsPerConnection));
  }
  decoded.mtu = in[8];
  if (decoded.mtu < 1 || decoded.mtu > 5) {
    return fail(error, "MTU code " + std::to_string(decoded.mtu) + ", must be 1 (256) .. 5 (4096)");
  }
  if ((in[9] & ~(kFlagSplit | kFlagAdaptiveRouting | kFlagEce)) != 0) {
    return fail(error, "unknown flags " + std::to_string(in[9]));
  }
  decoded.split_data = (in[9] & kFlagSplit) != 0;
  decoded.adaptive_routing = (in[9] & kFlagAdaptiveRouting) != 0;
  decoded.ece = (in[9] & kFlagEce) != 0;
  decoded.lid = get_le16(in + 10);
  decoded.listen_id = get_le32(in + 12);
  if (decoded.listen_id == 0) return fail(error, "listen id 0");
  std::memcpy(decoded.gid, in + 16, 16);
  if (decoded.link_layer == LinkLayer::Ethernet && all_zero(decoded.gid, 16)) {
    return fail(error, "RoCE peer without a GID");
  }
  if (decoded.link_layer == LinkLayer::InfiniBand && decoded.lid == 0 &&
      all_zero(decoded.gid, 16)) {
    return fail(error, "InfiniBand peer with neither LID nor GID");
  }
  decoded.fifo_address = get_le64(in + 32);
  decoded.fifo_rkey = get_le32(in + 40);
  if ((decoded.fifo_address == 0) != (decoded.role == Role::OneSided) ||
      (decoded.role == Role::OneSided && decoded.fifo_rkey != 0)) {
    return fail(error,
                decoded.role == Role::OneSided ? "a FIFO from a one-sided rank" : "FIFO address 0");
  }
  if (get_le32(in + 44) != 0) return fail(error, "nonzero reserved bytes");
  decoded.secret = get_le64(in + 120);
  if (decoded.role == Role::Receiver && decoded.secret != 0) {
    return fail(error, "a receiver that sends a listen secret");
  }
  std::string problem;
  if (!PeerIdentity::unpack(in + 128, PeerIdentity::kPackedSize, &decoded.process, &problem)) {
    return fail(error, "liveness identity: " + problem);
  }
  if (decoded.process.token == 0 && !all_zero(in + 136, PeerIdentity::kPackedSize - 8)) {
    return fail(error, "liveness address without a token");
  }
  decoded.link_key = get_le64(in + 160);
  if ((decoded.process.token == 0) != (decoded.link_key == 0)) {
    return fail(error, decoded.link_key == 0 ? "a liveness identity without a link key"
                                             : "a link key without a liveness identity");
  }
  if (decoded.ece) {
    decoded.ece_vendor_id = get_le32(in + 112);
    decoded.ece_options = get_le32(in + 116);
  } else if (!all_zero(in + 112, 8)) {
    return fail(error, "ECE vendor id/options without the ECE flag");
  }
  for (int q = 0; q < kMaxQpsPerConnection; ++q) {
    decoded.qpn[q] = get_le32(in + 48 + 4 * q);
    bool used = q < decoded.qp_count;
    if (used && (decoded.qpn[q] == 0 || decoded.qpn[q] > 0xffffff)) {
      return fail(error, "queue pair number " + std::to_string(decoded.qpn[q]) + " at " +
                             std::to_string(q) + " is not a 24-bit QPN");
    }
    if (!used && decoded.qpn[q] != 0) {
      return fail(error, "queue pair number at " + std::to_string(q) + " beyond the count " +
                             std::to_string(decoded.qp_count));
    }
  }
  *info = decoded;
  return true;
}

CtsState check_cts_group(const volatile FifoEntry* entries, uint32_t sequence, int* count,
                         std::string* error) {
  const uint32_t expected = cts_sequence(sequence);
  if (entries[0].sequence != expected) return CtsState::NotYet;
  const int first_count = entries[0].count;
  if (first_count < 1 || first_count > kMaxRecvs) {
    *error = "clear-to-send for receive " + std::to_string(sequence) + " announces " +
             std::to_string(first_count) + " buffers (1.." + std::to_string(kMaxRecvs) + ")";
    return CtsState::Invalid;
  }
  for (int i = 0; i < first_count; ++i) {
    const volatile FifoEntry& entry = entries[i];
    if (entry.sequence != expected) return CtsState::NotYet;  // still being written
    const std::string where =
        "clear-to-send entry " + std::to_string(i) + " of receive " + std::to_string(sequence);
    if (entry.count != first_count || entry.index != i || entry.reserved != 0) {
      *error = where + " is inconsistent (count " + std::to_string(entry.count) + ", index " +
               std::to_string(entry.index) + ")";
      return CtsState::Invalid;
    }
    if (entry.address + entry.size < entry.address) {
      *error = where + " wraps the address space";
      return CtsState::Invalid;
    }
  }
  *count = first_count;
  return CtsState::Ready;
}

uint32_t immediate_for(int count, size_t size, uint32_t sequence) {
  if (count == 1 && size < kImmSizesInFifo) return static_cast<uint32_t>(size);
  return kImmSizesInFifo | (sequence & ~kImmSizesInFifo);
}

ImmKind decode_immediate(uint32_t imm, int count, uint32_t sequence, size_t posted_size,
                         size_t* size, std::string* error) {
  if ((imm & kImmSizesInFifo) != 0) {
    if ((imm & ~kImmSizesInFifo) != (sequence & ~kImmSizesInFifo)) {
      *error = "immediate names receive " + std::to_string(imm & ~kImmSizesInFifo) + ", expected " +
               std::to_string(sequence & ~kImmSizesInFifo);
      return ImmKind::Invalid;
    }
    return ImmKind::SizesInFifo;
  }
  if (count != 1) {
    *error = "immediate carries a size (" + std::to_string(imm) + ") for a group of " +
             std::to_string(count) + " receives";
    return ImmKind::Invalid;
  }
  if (imm > posted_size) {
    *error = "message truncated: the peer sent " + std::to_string(imm) + " bytes to a receive of " +
             std::to_string(posted_size);
    return ImmKind::Truncated;
  }
  *size = imm;
  return ImmKind::Size;
}

}  // namespace weft::verbs
