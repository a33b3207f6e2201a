// The wire between NICs: each process listens on
// <registry>/nic-<pid>-<nonce>-<n>.sock. A requester opens one connection per
// peer process (itself included, for loopback) and sends requests on it; the
// peer answers on the same connection, in request order. Every frame is a
// fixed header and a payload; payloads go from the source memory to the
// socket and from the socket to the target memory without staging when they
// are large.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "memory.h"
#include "nic.h"
#include "queue_pair.h"

namespace softverbs {

enum FrameType : uint8_t { kHello = 1, kRequest = 2, kResponse = 3 };

enum ResponseCode : uint8_t {
  kAck = 1,
  kReadResponse,
  kRnrNak,
  kAccessNak,
  kInvalidNak,
  kOperationalNak,
  kDropped,  // what a real target would silently drop; the requester times out
};

struct Frame {
  uint8_t type;
  uint8_t op;         // request: ibv_wr_opcode; response: ResponseCode
  uint8_t port;       // request: the target port the requester addressed
  uint8_t rnr_timer;  // RNR NAK: the target QP's min_rnr_timer
  uint32_t req_qpn;
  uint32_t resp_qpn;
  uint32_t psn;
  uint32_t imm;  // hello: the sender's pid
  uint32_t rkey;
  uint64_t remote_addr;
  uint64_t length;   // request: message length (also for reads)
  uint64_t payload;  // bytes following this header
  uint32_t qkey;     // SRD request: the Q_Key the requester addressed
  uint32_t reserved;
  uint8_t sgid[16];  // SRD request: the requester port's GID
};
static_assert(sizeof(Frame) == 72, "Frame layout");

constexpr size_t kInBuffer = 256 << 10;
constexpr size_t kOutLimit = 4 << 20;  // stop framing WRs beyond this backlog

struct OutChunk {
  std::vector<char> owned;
  const char* external = nullptr;
  size_t external_length = 0;
  size_t offset = 0;
  std::shared_ptr<Mr> keep;  // the memory `external` points into

  const char* data() const { return (external != nullptr ? external : owned.data()) + offset; }
  size_t left() const { return (external != nullptr ? external_length : owned.size()) - offset; }
};

struct Conn {
  enum class Done { kNone, kHello, kRequest, kRead };

  int fd = -1;
  bool outgoing = false;
  bool closed = false;
  bool dirty = false;
  bool want_out = false;
  std::shared_ptr<Peer> peer;  // outgoing: the target; incoming: from hello

  std::deque<OutChunk> out;
  size_t out_bytes = 0;

  std::vector<char> in = std::vector<char>(kInBuffer);
  size_t in_head = 0;
  size_t in_tail = 0;

  // The payload being received and what to do once it is complete.
  uint64_t payload_left = 0;
  std::vector<Piece> sink;  // empty: discard
  size_t sink_index = 0;
  size_t sink_offset = 0;
  Done done = Done::kNone;
  Frame frame{};
  std::shared_ptr<Qp> qp;
  bool with_recv = false;
  bool unsolicited = false;  // SRD write with immediate that consumes no receive
  RecvWr recv;
  std::string hello;
};

// Adds bytes to a connection's output: copied when small or when `keep` is
// null, else referenced (keeping the MR alive until sent).
void append(Conn& conn, const void* data, size_t len, const std::shared_ptr<Mr>* keep);

}  // namespace softverbs
