// 64-bit libfabric tags. Comms that share an endpoint are told apart by the
// receiver's comm id; the NCCL tag picks the slot of a grouped receive, and
// the provider's send-after-send ordering (required at discovery) keeps
// messages of one comm and tag in posting order.
//
//   data:    0 | recv comm id (31 bits) | NCCL tag (32 bits)
//   control: 1 | kind (connect, ack, clear-to-send, eager) | id (32 bits)
#pragma once

#include <cstdint>

#include "core/comm_id.h"

namespace weft::ofi {

constexpr uint64_t kControlBit = 1ull << 63;
constexpr uint64_t kConnectKind = 1ull << 62;
constexpr uint64_t kAckKind = 1ull << 61;
// RDMA protocol: clear-to-send to a send comm, eager data to a recv comm.
constexpr uint64_t kCtsKind = 1ull << 60;
constexpr uint64_t kEagerKind = 1ull << 59;
// One-sided comms, on their own endpoint: their signals sent as messages
// where the provider has no atomics, and their setup records (rma_inbox.h).
constexpr uint64_t kRmaSignalKind = 1ull << 57;

constexpr uint64_t rma_signal_tag(uint32_t comm_id) {
  return kControlBit | kRmaSignalKind | comm_id;
}

constexpr uint64_t data_tag(uint32_t recv_comm_id, int nccl_tag) {
  return (static_cast<uint64_t>(recv_comm_id & kMaxCommId) << 32) | static_cast<uint32_t>(nccl_tag);
}

// Every connect request to an endpoint, whichever listener it names
// (connect_inbox.h): id 0, which no listener or comm has.
constexpr uint64_t kConnectInboxTag = kControlBit | kConnectKind;

constexpr uint64_t ack_tag(uint32_t send_comm_id) {
  return kControlBit | kAckKind | send_comm_id;
}

constexpr uint64_t cts_tag(uint32_t send_comm_id) {
  return kControlBit | kCtsKind | send_comm_id;
}

constexpr uint64_t eager_tag(uint32_t recv_comm_id) {
  return kControlBit | kEagerKind | recv_comm_id;
}

}  // namespace weft::ofi
