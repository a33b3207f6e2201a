// Test aid (WEFT_OFI_TEST_HOSTILE): this process plays a buggy or hostile
// peer that changes one field of every message of one kind it sends after
// connecting, so a test can show that the other side, an unchanged weft,
// fails the connection naming the peer, never crashes and writes nothing
// outside its posted buffers (plugin-tests/functional/hostile_peer_test.cpp).
// Off in real use: one predictable branch where such a field is encoded.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "ofi/wire/rdma_wire.h"

namespace weft::ofi {

enum class WireMutation : uint8_t {
  kNone,
  // Clear-to-sends (a hostile receiver against a sender).
  kCtsSlot,        // a request slot beyond the 32 there are
  kCtsSequence,    // the group sequence number one ahead
  kCtsFirstIndex,  // the group's first message index three ahead
  kCtsRails,       // one rail more than the connection has
  kCtsCount,       // no entries
  kCtsSize,        // posted sizes of 0: every message is too large
  kCtsKey,         // remote keys no registration has
  kCtsAddress,     // addresses 1 GiB past the posted buffers
  kCtsTag,         // tags the sender does not send
  // Eager messages and writes (a hostile sender against a receiver).
  kEagerIndex,     // message indices 1000 ahead
  kEagerTag,       // tags the receiver did not post
  kWriteSlot,      // another request slot
  kWriteEntry,     // an entry beyond the group
  kWriteSegments,  // one segment more than are written
  kWriteOversize,  // past the posted size, ignoring it
  // The tagged protocol: the size in the immediate one larger than sent.
  kTaggedSize,
};

// "" is kNone; false for an unknown name.
bool parse_wire_mutation(std::string_view name, WireMutation* out);
// The names, space-separated, for messages and tests.
std::string wire_mutation_names();

void mutate_cts(WireMutation mutation, CtsMessage* cts);
void mutate_eager(WireMutation mutation, uint32_t* index, int32_t* tag);
void mutate_write(WireMutation mutation, WriteImmediate* immediate);

}  // namespace weft::ofi
