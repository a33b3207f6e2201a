#include "core/link_messages.h"

#include "core/byte_codec.h"

namespace weft {

void encode_link_frame_header(const LinkFrameHeader& header, uint8_t* out) {
  out[0] = header.kind;
  out[1] = 0;
  put_le16(out + 2, header.length);
  put_le32(out + 4, header.to);
  put_le32(out + 8, header.from);
}

bool decode_link_frame_header(const uint8_t* in, LinkFrameHeader* header, std::string* error) {
  header->kind = in[0];
  header->length = get_le16(in + 2);
  header->to = get_le32(in + 4);
  header->from = get_le32(in + 8);
  if (in[1] != 0) {
    *error = "link message with reserved byte " + std::to_string(in[1]);
    return false;
  }
  if (header->length > kMaxLinkPayload) {
    *error = "link message of " + std::to_string(header->length) + " bytes (at most " +
             std::to_string(kMaxLinkPayload) + ")";
    return false;
  }
  if (header->to == 0) {
    *error = "link message to mailbox 0";
    return false;
  }
  return true;
}

uint32_t Mailboxes::open() {
  std::lock_guard<std::mutex> lock(mutex_);
  uint32_t id = next_++;
  while (id == 0 || boxes_.count(id) != 0) id = next_++;
  boxes_[id];
  return id;
}

std::vector<LinkMessage> Mailboxes::close(uint32_t id) {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<LinkMessage> unread;
  auto found = boxes_.find(id);
  if (found == boxes_.end()) return unread;
  Box& box = found->second;
  for (size_t i = box.next; i < box.messages.size(); ++i)
    unread.push_back(std::move(box.messages[i]));
  boxes_.erase(found);
  return unread;
}

bool Mailboxes::deliver(uint32_t to, LinkMessage message) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto found = boxes_.find(to);
  if (found == boxes_.end()) return false;
  found->second.messages.push_back(std::move(message));
  return true;
}

bool Mailboxes::take(uint32_t id, LinkMessage* out) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto found = boxes_.find(id);
  if (found == boxes_.end()) return false;
  Box& box = found->second;
  if (box.next == box.messages.size()) return false;
  *out = std::move(box.messages[box.next++]);
  if (box.next == box.messages.size()) {
    box.messages.clear();
    box.next = 0;
  } else if (box.next >= 64 && 2 * box.next >= box.messages.size()) {
    // Still arriving as fast as taken: drop the taken half.
    box.messages.erase(box.messages.begin(), box.messages.begin() + static_cast<long>(box.next));
    box.next = 0;
  }
  return true;
}

}  // namespace weft
