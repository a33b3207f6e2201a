#include "ofi/endpoint/message_matcher.h"

#include <rdma/fi_errno.h>

#include <cstring>

#include "ofi/endpoint/tag_layout.h"

namespace weft::ofi {
namespace {

constexpr uint64_t kKinds[4] = {kConnectKind, kAckKind, kCtsKind, kEagerKind};

}  // namespace

bool compact_tag(uint64_t tag, uint32_t* compact) {
  if ((tag & kControlBit) == 0) return false;
  uint64_t id = tag & 0xffffffffull;
  if (id > kMaxCompactId) return false;
  for (uint32_t kind = 0; kind < 4; ++kind) {
    if ((tag & ~0xffffffffull) == (kControlBit | kKinds[kind])) {
      *compact = (kind << 30) | static_cast<uint32_t>(id);
      return true;
    }
  }
  return false;
}

uint64_t expand_tag(uint32_t compact) {
  return kControlBit | kKinds[compact >> 30] | (compact & kMaxCompactId);
}

MessageMatcher::MessageMatcher(int pool_slots, uint8_t* pool, size_t slot_size)
    : pool_(pool),
      slot_size_(slot_size),
      held_length_(static_cast<size_t>(pool_slots), 0),
      held_has_data_(static_cast<size_t>(pool_slots), 0),
      held_data_(static_cast<size_t>(pool_slots), 0),
      held_next_(static_cast<size_t>(pool_slots), -1) {
  // Every pool slot may carry a completion, and so may each cancellation.
  completions_.reserve(static_cast<size_t>(pool_slots) * 2);
  draining_.reserve(static_cast<size_t>(pool_slots) * 2);
}

int MessageMatcher::new_posted() {
  if (free_posted_ >= 0) {
    int index = free_posted_;
    free_posted_ = posted_[static_cast<size_t>(index)].next;
    return index;
  }
  posted_.emplace_back();  // grows with the receives posted at once, not per message
  return static_cast<int>(posted_.size()) - 1;
}

void MessageMatcher::complete(const Posted& posted, int slot, size_t length) {
  const auto at = static_cast<size_t>(slot);
  Completion completion;
  completion.context = posted.context;
  posted.context->matcher_index = -1;
  completion.has_data = held_has_data_[at] != 0;
  completion.data = held_data_[at];
  if (length > posted.size) {
    completion.error = kTruncated;
    completion.overflow = length - posted.size;
  } else {
    if (length > 0) std::memcpy(posted.buffer, pool_ + at * slot_size_, length);
    completion.length = length;
  }
  completions_.push_back(completion);
}

void MessageMatcher::post(uint64_t tag, void* buffer, size_t size, OpContext* context,
                          int* released) {
  *released = -1;
  Queues& queues = queues_[tag];
  Posted posted;
  posted.tag = tag;
  posted.buffer = buffer;
  posted.size = size;
  posted.context = context;
  if (queues.held_head >= 0) {
    int slot = queues.held_head;
    queues.held_head = held_next_[static_cast<size_t>(slot)];
    if (queues.held_head < 0) queues.held_tail = -1;
    --held_;
    complete(posted, slot, held_length_[static_cast<size_t>(slot)]);
    *released = slot;
    return;
  }
  int index = new_posted();
  posted_[static_cast<size_t>(index)] = posted;
  context->matcher_index = index;
  if (queues.posted_tail >= 0) {
    posted_[static_cast<size_t>(queues.posted_tail)].next = index;
  } else {
    queues.posted_head = index;
  }
  queues.posted_tail = index;
}

bool MessageMatcher::arrive(uint64_t tag, int slot, size_t length, const uint64_t* data) {
  // A tag with a sink is open (close_id forgets the sink): one lookup on
  // an eager message's way.
  auto found = queues_.find(tag);
  if (found != queues_.end() && found->second.sink != nullptr &&
      found->second.sink->take(pool_ + static_cast<size_t>(slot) * slot_size_, length, data,
                               found->second.held_head >= 0)) {
    return true;
  }
  if (open_ids_.count(static_cast<uint32_t>(tag & kMaxCompactId)) == 0) {
    ++dropped_;
    return true;
  }
  Queues& queues = found != queues_.end() ? found->second : queues_[tag];
  held_has_data_[static_cast<size_t>(slot)] = data != nullptr;
  held_data_[static_cast<size_t>(slot)] = data != nullptr ? *data : 0;
  if (queues.posted_head >= 0) {
    int index = queues.posted_head;
    Posted& posted = posted_[static_cast<size_t>(index)];
    queues.posted_head = posted.next;
    if (queues.posted_head < 0) queues.posted_tail = -1;
    complete(posted, slot, length);
    posted = Posted{};
    posted.next = free_posted_;
    free_posted_ = index;
    return true;
  }
  held_length_[static_cast<size_t>(slot)] = length;
  held_next_[static_cast<size_t>(slot)] = -1;
  if (queues.held_tail >= 0) {
    held_next_[static_cast<size_t>(queues.held_tail)] = slot;
  } else {
    queues.held_head = slot;
  }
  queues.held_tail = slot;
  ++held_;
  return false;
}

void MessageMatcher::open_id(uint32_t id) {
  open_ids_.insert(id);
}

void MessageMatcher::close_id(uint32_t id, std::vector<int>* released) {
  open_ids_.erase(id);
  for (uint32_t kind = 0; kind < 4; ++kind) {
    auto found = queues_.find(expand_tag((kind << 30) | id));
    if (found == queues_.end()) continue;
    for (int slot = found->second.held_head; slot >= 0;
         slot = held_next_[static_cast<size_t>(slot)]) {
      released->push_back(slot);
      --held_;
      ++dropped_;
    }
    found->second.held_head = found->second.held_tail = -1;
    found->second.sink = nullptr;
    if (found->second.posted_head < 0) queues_.erase(found);
  }
}

void MessageMatcher::attach_sink(uint64_t tag, EagerSink* sink) {
  queues_[tag].sink = sink;
}

void MessageMatcher::detach_sink(uint64_t tag) {
  auto found = queues_.find(tag);
  if (found == queues_.end()) return;
  found->second.sink = nullptr;
  if (found->second.posted_head < 0 && found->second.held_head < 0) queues_.erase(found);
}

bool MessageMatcher::cancel(OpContext* context) {
  const int index = context->matcher_index;
  if (index < 0 || static_cast<size_t>(index) >= posted_.size() ||
      posted_[static_cast<size_t>(index)].context != context) {
    return false;
  }
  Posted& entry = posted_[static_cast<size_t>(index)];
  auto found = queues_.find(entry.tag);
  if (found == queues_.end()) return false;
  Queues& queues = found->second;
  int previous = -1;
  for (int at = queues.posted_head; at >= 0;
       previous = at, at = posted_[static_cast<size_t>(at)].next) {
    if (at != index) continue;
    if (previous < 0) {
      queues.posted_head = entry.next;
    } else {
      posted_[static_cast<size_t>(previous)].next = entry.next;
    }
    if (queues.posted_tail == index) queues.posted_tail = previous;
    Completion completion;
    completion.context = context;
    completion.error = FI_ECANCELED;
    completions_.push_back(completion);
    context->matcher_index = -1;
    entry = Posted{};
    entry.next = free_posted_;
    free_posted_ = index;
    // A closed comm's tags do not come back: forget them when idle.
    if (queues.posted_head < 0 && queues.held_head < 0 && queues.sink == nullptr)
      queues_.erase(found);
    return true;
  }
  return false;
}

}  // namespace weft::ofi
