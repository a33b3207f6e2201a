// One direction of traffic on one comm, the way NCCL's proxy drives it:
// keep up to `depth` requests posted, test the oldest, post again as they
// finish. A NULL request from the backend means "no resources now": keep
// testing and post later. step() never blocks, so one thread can drive the
// streams of several comms. Receives into GPU memory are flushed the way
// NCCL's proxy does it: iflush once the request completed, and the request's
// buffers are free only when the flush request completed too.
#pragma once

#include <cstddef>
#include <vector>

#include "backend.h"
#include "message_buffers.h"

namespace weft::perf {
struct FlushCounters;
}

namespace weft::perf {

struct StreamSpec {
  const char* test;  // for error messages
  size_t size = 0;
  size_t slots = 1;  // message m uses slot m % slots
  int messages = 0;  // a multiple of group
  int group = 1;     // receives per request; the sender cycles tags 0..group-1
  int depth = 32;    // sends in flight; receive requests: depth / group
  bool check = true;
  bool flush = false;  // GPU memory: iflush each completed receive request
  FlushCounters* flushes = nullptr;
};

class SendStream {
 public:
  SendStream(Backend& backend, int comm, MessageBuffers& buffers, const StreamSpec& spec);
  // Posts what fits and retires finished sends; true if any finished.
  bool step();
  bool done() const { return completed_ == spec_.messages; }

 private:
  Backend& backend_;
  int comm_;
  MessageBuffers& buffers_;
  StreamSpec spec_;
  std::vector<void*> ring_;
  size_t head_ = 0;
  size_t inflight_ = 0;
  int posted_ = 0;
  int completed_ = 0;
};

class RecvStream {
 public:
  RecvStream(Backend& backend, int comm, MessageBuffers& buffers, const StreamSpec& spec);
  // Posts receive requests while there is room (before the sender starts).
  void fill();
  // Retires finished requests (checking their sizes) and posts more; true
  // if any finished.
  bool step();
  bool done() const { return completed_ == requests_; }

 private:
  Backend& backend_;
  int comm_;
  MessageBuffers& buffers_;
  StreamSpec spec_;
  // Flushes the oldest request's buffers (it completed with sizes got);
  // false while the flush is still in flight.
  bool flushed(const int* got);

  int requests_;
  void* flushing_ = nullptr;  // the oldest request's flush, in flight
  std::vector<void*> ring_;
  size_t head_ = 0;
  size_t inflight_ = 0;
  int posted_ = 0;
  int completed_ = 0;
};

}  // namespace weft::perf
