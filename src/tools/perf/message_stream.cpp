#include "message_stream.h"

#include <algorithm>

#include "pattern.h"

namespace weft::perf {

SendStream::SendStream(Backend& backend, int comm, MessageBuffers& buffers, const StreamSpec& spec)
    : backend_(backend),
      comm_(comm),
      buffers_(buffers),
      spec_(spec),
      ring_(static_cast<size_t>(std::max(spec.depth, 1)), nullptr) {}

bool SendStream::step() {
  const size_t depth = ring_.size();
  while (posted_ < spec_.messages && inflight_ < depth) {
    size_t slot = static_cast<size_t>(posted_) % spec_.slots;
    int tag = posted_ % spec_.group;
    void* req = backend_.post_send(comm_, buffers_.send_slot(spec_.size, slot), spec_.size, tag,
                                   buffers_.send_mr());
    if (req == nullptr) break;
    ring_[(head_ + inflight_) % depth] = req;
    ++inflight_;
    ++posted_;
  }
  bool any = false;
  int got[kMaxGroup];
  while (inflight_ > 0 && backend_.test(comm_, ring_[head_], got)) {
    head_ = (head_ + 1) % depth;
    --inflight_;
    ++completed_;
    any = true;
  }
  return any;
}

RecvStream::RecvStream(Backend& backend, int comm, MessageBuffers& buffers, const StreamSpec& spec)
    : backend_(backend),
      comm_(comm),
      buffers_(buffers),
      spec_(spec),
      requests_(spec.messages / spec.group),
      ring_(static_cast<size_t>(std::max(spec.depth / spec.group, 1)), nullptr) {}

void RecvStream::fill() {
  const size_t depth = ring_.size();
  const int g = spec_.group;
  void* data[kMaxGroup];
  size_t sizes[kMaxGroup];
  int tags[kMaxGroup];
  void* mrs[kMaxGroup];
  while (posted_ < requests_ && inflight_ < depth) {
    for (int j = 0; j < g; ++j) {
      size_t slot = (static_cast<size_t>(posted_) * g + j) % spec_.slots;
      data[j] = buffers_.recv_slot(spec_.size, slot);
      sizes[j] = spec_.size;
      tags[j] = j;
      mrs[j] = buffers_.recv_mr();
    }
    void* req = backend_.post_recv(comm_, g, data, sizes, tags, mrs);
    if (req == nullptr) break;
    ring_[(head_ + inflight_) % depth] = req;
    ++inflight_;
    ++posted_;
  }
}

bool RecvStream::step() {
  const size_t depth = ring_.size();
  bool any = false;
  int got[kMaxGroup];
  while (inflight_ > 0) {
    if (flushing_ == nullptr) {
      if (!backend_.test(comm_, ring_[head_], got)) break;
      if (spec_.check) {
        for (int j = 0; j < spec_.group; ++j) check_completion_size(spec_.test, spec_.size, got[j]);
      }
      if (spec_.flush && !flushed(got)) break;
    } else {
      if (!backend_.test(comm_, flushing_, got)) break;
      flushing_ = nullptr;
    }
    head_ = (head_ + 1) % depth;
    --inflight_;
    ++completed_;
    any = true;
  }
  fill();
  return any;
}

bool RecvStream::flushed(const int* got) {
  const int g = spec_.group;
  void* data[kMaxGroup];
  int sizes[kMaxGroup];
  void* mrs[kMaxGroup];
  for (int j = 0; j < g; ++j) {
    size_t slot = (static_cast<size_t>(completed_) * g + j) % spec_.slots;
    data[j] = buffers_.recv_slot(spec_.size, slot);
    sizes[j] = got[j];
    mrs[j] = buffers_.recv_mr();
  }
  flushing_ = start_flush(backend_, spec_.flushes, comm_, g, data, sizes, mrs);
  if (flushing_ == nullptr) return true;
  int ignored[kMaxGroup];
  if (!backend_.test(comm_, flushing_, ignored)) return false;
  flushing_ = nullptr;
  return true;
}

}  // namespace weft::perf
