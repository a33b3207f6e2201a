// What the verbs transport's peers exchange, and how every byte is checked:
//
// - ConnectionInfo, once per direction over the TCP side channel (and
//   between every two ranks of a one-sided comm, role OneSided): queue pair
//   numbers, the port's address (LID, GID), MTU, the FIFO the peer writes
//   into (the sender's clear-to-send FIFO, the receiver's sizes FIFO) and
//   the process's liveness identity.
// - FifoEntry, written by the receiver with an RDMA write into the sender's
//   FIFO: one per receive of a group, naming the buffer, its size and tag.
// - The immediate of the last write of a message: the size of a single
//   receive, or a marker that the sizes are in the receiver's sizes FIFO.
//
// A buggy or hostile peer cannot make weft write outside a buffer it
// registered: the sender writes only where the receiver's CTS points (its
// NIC checks the key and bounds), and the receiver accepts no size above
// what it posted and no sequence it did not expect.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "core/handle_header.h"
#include "core/peer_links.h"
#include "weft/transport.h"

namespace weft::verbs {

constexpr int kMaxQpsPerConnection = 16;
constexpr int kFifoSlots = kMaxRequests;  // one slot per request NCCL may have in flight

enum class LinkLayer : uint8_t { InfiniBand = 1, Ethernet = 2 };
// OneSided: a rank of a one-sided comm (verbs/rma_comm.h): one queue pair,
// no FIFO (its address 0), the same message both ways.
enum class Role : uint8_t { Sender = 1, Receiver = 2, OneSided = 3 };

struct ConnectionInfo {
  Role role = Role::Sender;
  LinkLayer link_layer = LinkLayer::InfiniBand;
  uint8_t qp_count = 1;
  uint8_t mtu = 0;  // enum ibv_mtu, 1 (256) .. 5 (4096)
  uint16_t lid = 0;
  uint32_t listen_id = 0;  // the listener this connects to (sender), or answers from (receiver)
  // The sender presents the listen handle's secret (core/listen_secret.h);
  // a receiver never sends one back (0).
  uint64_t secret = 0;
  uint8_t gid[16] = {};
  uint32_t qpn[kMaxQpsPerConnection] = {};
  uint64_t fifo_address = 0;  // sender: its CTS FIFO; receiver: its sizes FIFO
  uint32_t fifo_rkey = 0;
  bool split_data = false;        // sender's choice, adopted by the receiver
  bool adaptive_routing = false;  // informational: the sender decides how it writes
  // Enhanced Connection Establishment: the sender's offer, the receiver's
  // answer (what it set from the offer), absent where the device has none.
  bool ece = false;
  uint32_t ece_vendor_id = 0;
  uint32_t ece_options = 0;
  // Where this process's liveness links are accepted (token 0: none). With
  // one, both sides watch the shared link to the peer process and close the
  // side channel once connected: no fd per comm.
  PeerIdentity process;
  // What proves a link hello to this process (0 exactly when the token is).
  uint64_t link_key = 0;
};

// The listen handle's payload: the listener hub's address (a packed socket
// address, 24 bytes); where the listening process has liveness links, then
// its identity (32) and the listen comm's mailbox (u32 little-endian, not
// 0): 24 or 60 bytes.
struct ListenPayload {
  SocketAddress hub;
  PeerIdentity process;  // token 0: connect to the hub
  uint32_t mailbox = 0;
};
constexpr size_t kListenPayloadSize = SocketAddress::kPackedSize + PeerIdentity::kPackedSize + 4;
// `mailbox` 0: the hub's address alone.
void encode_listen_payload(const SocketAddress& hub, const PeerIdentity& process, uint32_t mailbox,
                           ListenHandle* handle);
bool decode_listen_payload(const ListenHandle& handle, ListenPayload* out, std::string* error);

constexpr size_t kConnectionInfoSize = 168;
void encode_connection_info(const ConnectionInfo& info, uint8_t out[kConnectionInfoSize]);
// False, with the field and value named in *error, for anything malformed,
// or a message from the wrong role.
bool decode_connection_info(const uint8_t* bytes, size_t size, Role expected, ConnectionInfo* info,
                            std::string* error);

// One receive of a group, as the sender finds it in its FIFO. The layout is
// the bytes the receiver's NIC writes, so it is fixed here.
struct FifoEntry {
  uint64_t address;
  uint64_t size;  // posted size
  uint32_t rkey;
  int32_t tag;
  uint32_t sequence;  // the receive's sequence number + 1 (0: never written)
  uint8_t count;      // receives in the group
  uint8_t index;      // this entry's place in the group
  uint16_t reserved;  // 0
};
static_assert(sizeof(FifoEntry) == 32, "FifoEntry is wire format");

// The FIFO slot of a sequence number.
constexpr int fifo_slot(uint32_t sequence) {
  return static_cast<int>(sequence % kFifoSlots);
}
// What the entries of sequence number `sequence` carry.
constexpr uint32_t cts_sequence(uint32_t sequence) {
  return sequence + 1 == 0 ? 1 : sequence + 1;
}

enum class CtsState { NotYet, Ready, Invalid };
// Reads the group at `entries` (kMaxRecvs entries, possibly still being
// written) for `sequence`: NotYet until every entry of the group arrived,
// Invalid (with the reason) when an entry breaks a rule.
CtsState check_cts_group(const volatile FifoEntry* entries, uint32_t sequence, int* count,
                         std::string* error);

// The immediate of a message's last write.
constexpr uint32_t kImmSizesInFifo = 0x80000000u;
uint32_t immediate_for(int count, size_t size, uint32_t sequence);
// Where the sizes come from, checked against what the receiver expects.
// Truncated: the sender had more than was posted and wrote none of it.
enum class ImmKind { Size, SizesInFifo, Truncated, Invalid };
ImmKind decode_immediate(uint32_t imm, int count, uint32_t sequence, size_t posted_size,
                         size_t* size, std::string* error);

}  // namespace weft::verbs
