// Messages between weft processes on their liveness link (peer_links.h), so
// that a comm's connection setup needs no TCP connection of its own (the
// verbs transport's connection info: one link per pair of processes carries
// the setup of all their comms). A message goes to a mailbox in the other
// process, named by the 32-bit id that process handed out (in a listen
// handle, or as the `from` of an earlier message).
//
// Frame, after the link's hello, little-endian:
//   0 kind u8 (kNoMailbox: sent back by weft itself; others: the user's)
//   1 reserved u8 (0)     2 payload length u16 (at most kMaxLinkPayload)
//   4 to u32 (not 0)      8 from u32 (0: no answer expected)
//   12 payload
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace weft {

class PeerLink;

constexpr size_t kLinkFrameHeaderSize = 12;
constexpr size_t kMaxLinkPayload = 512;
// The answer to a message whose mailbox is not open (closed, or never
// was): its payload is the mailbox id, u32.
constexpr uint8_t kNoMailbox = 0;
// The only answer to a hello that proved nothing (peer_links.h), to
// mailbox kAnyMailbox, no payload; the connection closes after it. It says
// no more than the close would, but tells a peer that presented a stale
// handle's secret from one whose process died.
constexpr uint8_t kLinkRefused = 0xff;
constexpr uint32_t kAnyMailbox = 0xffffffff;

struct LinkFrameHeader {
  uint8_t kind = 0;
  uint16_t length = 0;
  uint32_t to = 0;
  uint32_t from = 0;
};

void encode_link_frame_header(const LinkFrameHeader& header, uint8_t* out);
// False, naming the field, for a non-zero reserved byte, an oversized
// payload or mailbox 0.
bool decode_link_frame_header(const uint8_t* in, LinkFrameHeader* header, std::string* error);

struct LinkMessage {
  std::weak_ptr<PeerLink> link;  // it came on this link; answers go back on it
  uint8_t kind = 0;
  uint32_t from = 0;
  std::vector<uint8_t> payload;
};

// One process's mailboxes. Connection setup only: nothing here is on a
// data path.
class Mailboxes {
 public:
  // A new mailbox: never 0, not reused while open.
  uint32_t open();
  // Closes `id`; returns the messages that waited there unread.
  std::vector<LinkMessage> close(uint32_t id);
  // False when `to` is not open.
  bool deliver(uint32_t to, LinkMessage message);
  // The oldest message waiting in `id`; false when none.
  bool take(uint32_t id, LinkMessage* out);

 private:
  // Mostly empty (one per listen comm), so a vector, which allocates
  // nothing until a message comes; read from `next`, so that a burst of
  // thousands of connect requests is taken in linear time.
  struct Box {
    std::vector<LinkMessage> messages;
    size_t next = 0;
  };
  std::mutex mutex_;
  uint32_t next_ = 1;
  std::unordered_map<uint32_t, Box> boxes_;
};

}  // namespace weft
