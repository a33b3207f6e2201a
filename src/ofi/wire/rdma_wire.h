// Bytes of the RDMA protocol that cross the wire after connection setup:
// clear-to-send messages (receiver -> sender), eager headers (sender ->
// receiver) and the 32-bit immediate of every data write. Every decoder
// checks every field: these bytes come from a peer that may be buggy.
// Little-endian (docs/wire-formats.md):
//
// Clear-to-send: 0 magic u32 "WFTR", 4 version u8, 5 count u8, 6 slot u8,
//   7 rails u8, 8 group sequence u32, 12 first index u32, 16 skipped u16
//   (the groups just before this one, filled eagerly, that get no
//   clear-to-send of their own; 0..kRdmaMaxSkipped), 18 zero u16, then
//   `count` entries of 16 + 16 x rails: 0 size u64, 8 tag i32, 12 zero u32,
//   and per rail r at 16 + 16r: address u64, key u64.
// Eager messages (sender -> receiver, on the eager tag) carry a 32-bit
//   remote CQ data, the eager immediate: 0x80000000 when an eager header
//   starts the message (notices, and data whose tag does not fit), else
//   NCCL tag (20 bits, two's complement, |tag| < 2^19) << 12 | message
//   index (its low 12 bits). Such data travels without a header, so a
//   message of the provider's inject size still goes out as one inject.
// Eager header (24): 0 magic u32 "WFTE", 4 version u8, 5 flags u8 (1
//   truncated, 2 size notice, 4 aborted, 8 probe; at most one), 6 zero
//   u16, 8 index u32, 12 tag i32, 16 size u64 (a probe's index, tag and
//   size are zero).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "ofi/wire/rails.h"

namespace weft::ofi {

// One receive group per clear-to-send; NCCL groups at most 8 receives and
// keeps at most 32 requests in flight per comm.
constexpr int kRdmaMaxEntries = 8;
constexpr int kRdmaSlots = 32;
// A message travels in at most this many writes (large messages, rails).
constexpr int kRdmaMaxSegments = 16;
// A clear-to-send speaks for at most this many skipped groups before it.
// Rare enough that a ping-pong's p99 does not see the clear-to-send; the
// sender's eager window (eager_ahead) bounds a run's messages too.
constexpr int kRdmaMaxSkipped = 128;

// Where one posted receive is, on every rail of the connection: each rail
// registers the buffer on its own domain, so keys (and, without
// FI_MR_VIRT_ADDR, offsets) differ per rail.
struct CtsEntry {
  uint64_t size = 0;  // posted size
  int32_t tag = 0;
  uint64_t address[kMaxRails] = {};  // as each rail's provider wants it (address or offset)
  uint64_t key[kMaxRails] = {};
};

struct CtsMessage {
  uint32_t group_seq = 0;    // receiver's irecv sequence number
  uint32_t first_index = 0;  // cumulative index of the group's first message
  uint8_t slot = 0;          // receiver's request slot, named in immediates
  uint8_t count = 0;         // entries, 1..kRdmaMaxEntries
  uint8_t rails = 1;         // rails of the connection, 1..kMaxRails
  // Groups group_seq - skipped .. group_seq - 1 were filled by eager
  // messages alone and get no clear-to-send: together they cover the
  // messages before first_index not covered by older groups.
  uint16_t skipped = 0;
  CtsEntry entries[kRdmaMaxEntries];
};
constexpr size_t kCtsHeaderSize = 20;
constexpr size_t cts_entry_size(int rails) {
  return 16 + 16 * static_cast<size_t>(rails);
}
constexpr size_t kCtsMaxSize = kCtsHeaderSize + kRdmaMaxEntries * cts_entry_size(kMaxRails);

size_t cts_size(int count, int rails);
// Writes cts_size(cts.count, cts.rails) bytes.
void encode_cts(const CtsMessage& cts, uint8_t* out);
// The same, written in place part by part (irecv: no CtsMessage to fill
// first): the header with skipped = 0, then each of the `count` entries,
// with `rails` addresses and keys.
void encode_cts_header(uint8_t* out, uint32_t group_seq, uint32_t first_index, uint8_t slot,
                       uint8_t count, uint8_t rails);
void encode_cts_entry(uint8_t* out, int index, int rails, uint64_t size, int32_t tag,
                      const uint64_t* address, const uint64_t* key);
// Sets the skipped count of an encoded clear-to-send (decided when it leaves).
void set_cts_skipped(uint8_t* encoded, uint16_t skipped);
// rails: the connection's rail count, which the message must match. Posted
// sizes are not bounded here: a receive may be larger than any message, and
// the sender never writes more than it sends.
bool decode_cts(const uint8_t* bytes, size_t size, int rails, CtsMessage* cts, std::string* error);

// Header in front of eager data. Four notices carry no data: a truncation
// notice (the sender refused to write an oversized message), a size notice
// (the size of a written message, for providers whose write completions do
// not report a length; `tag` then names the entry), an abort notice (a
// write of the sender's failed, e.g. on a rail that went down: nothing
// more will arrive on this connection) and a probe (a sender that has
// waited a while for a clear-to-send checks that rail 0 still carries
// messages; the receiver drops it).
struct EagerHeader {
  uint32_t index = 0;  // sender's cumulative message index
  int32_t tag = 0;
  uint64_t size = 0;  // the sender's message size
  bool truncated = false;
  bool size_notice = false;
  bool aborted = false;
  bool probe = false;
};
constexpr size_t kEagerHeaderSize = 24;
void encode_eager_header(const EagerHeader& header, uint8_t* out);
// `length`: bytes that arrived (header + data); max_data: the eager limit.
bool decode_eager_header(const uint8_t* bytes, size_t length, uint64_t max_data,
                         EagerHeader* header, std::string* error);

// The eager immediate. The receiver rebuilds the full message index from
// its low 12 bits: a sender stays fewer than kRdmaEagerAhead messages ahead
// of the oldest group whose clear-to-send it still awaits, and a receiver
// has at most kRdmaSlots x kRdmaMaxEntries receives pending, so a message's
// index is within 512 of the receiver's next index.
constexpr uint32_t kEagerHeaderFollows = 0x80000000u;
constexpr int kEagerIndexBits = 12;
constexpr uint32_t kRdmaEagerAhead = kRdmaSlots * kRdmaMaxEntries;
// Receive buffers the sender keeps posted for clear-to-sends.
constexpr int kRdmaCtsBuffers = 8;
// How many messages a sender sends past the first one of the oldest group
// it has no clear-to-send for. Under weft's matching, clear-to-sends reach
// those buffers in any order, and fewer than kRdmaCtsBuffers such messages
// always leave a buffer for the one it needs (rdma_send_path.h).
constexpr uint32_t eager_ahead(bool weft_matching) {
  return weft_matching ? kRdmaCtsBuffers - 1 : kRdmaEagerAhead;
}
// Whether `tag` fits the immediate (otherwise the data follows a header).
bool eager_tag_fits(int32_t tag);
uint32_t encode_eager_immediate(uint32_t index, int32_t tag);
struct EagerImmediate {
  bool header_follows = false;  // the rest is in the eager header
  uint32_t index = 0;
  int32_t tag = 0;
};
// value: the remote CQ data, or nullptr when the message had none; next:
// the receiver's next message index, within 2^11 of the message's.
bool decode_eager_immediate(const uint64_t* value, uint32_t next, EagerImmediate* immediate,
                            std::string* error);

// Immediate data of a data write:
//   write target (16) | slot (5) | entry (3) | segments - 1 (4) | segment (4)
struct WriteImmediate {
  uint16_t target = 0;  // the receiver's remote-write target on its endpoint
  uint8_t slot = 0;
  uint8_t entry = 0;
  uint8_t segments = 1;  // 1..kRdmaMaxSegments
  uint8_t segment = 0;   // 0..segments-1
};
uint32_t encode_immediate(const WriteImmediate& immediate);
// Only the fields' ranges are checked here; the receiver checks them
// against its state.
bool decode_immediate(uint32_t value, WriteImmediate* immediate, std::string* error);

}  // namespace weft::ofi
