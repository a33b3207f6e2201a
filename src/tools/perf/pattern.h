// Pattern: one kind of measurement (latency, bandwidth, later message rate,
// bidirectional...), run one size step at a time on both ranks against any
// Transport. Rank 0 drives and gets the figures.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "bootstrap.h"
#include "message_buffers.h"
#include "options.h"
#include "progress_watch.h"
#include "transport.h"

namespace weft::perf {

struct SizeResult {
  std::string test;
  size_t size = 0;
  int count = 0;       // timed iterations (messages)
  double time_us = 0;  // per message (bw) / median half round trip (latency)
  double gbps = 0;     // decimal GB/s: bytes / time
  bool has_latency = false;
  double min_us = 0, median_us = 0, avg_us = 0, p99_us = 0;
};

struct PatternContext {
  Transport& transport;
  Bootstrap& boot;
  const Options& opts;
  MessageBuffers& buffers;
  ProgressWatch& watch;
  int rank;
};

class Pattern {
 public:
  virtual ~Pattern() = default;
  virtual const char* name() const = 0;
  virtual const char* title() const = 0;  // one line for the report
  virtual SizeResult run(PatternContext& ctx, size_t size) = 0;
};

std::unique_ptr<Pattern> make_latency_pattern();
std::unique_ptr<Pattern> make_bandwidth_pattern();

// Shared by the patterns.
int timed_iterations(const Options& opts, size_t size);
int warmup_iterations(const Options& opts, size_t size);

// Posts until the transport accepts (nullptr = retry), testing nothing else.
void* post_send_blocking(PatternContext& ctx, void* data, size_t size, void* mr);
void* post_recv_blocking(PatternContext& ctx, void* data, size_t size, void* mr);
// Tests until done; returns the size reported.
size_t wait_request(PatternContext& ctx, void* req, const char* what);
// Completion size check (cheap, done in the loop when checking).
void check_completion_size(const char* test, size_t expected, size_t got);

// After a size step: verify the receive slots this rank used (if any), then
// exchange results with the peer; throws DataMismatch if either side failed.
void verify_and_exchange(PatternContext& ctx, const char* test, size_t size, size_t recv_slots);

}  // namespace weft::perf
