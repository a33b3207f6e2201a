// Pattern: one kind of measurement (latency, bandwidth, bidirectional,
// message rate, grouped receives), run one size step at a time on both ranks
// against any Transport, over --comms comms driven by --threads threads.
// Rank 0 drives and gets the figures.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "bootstrap.h"
#include "message_buffers.h"
#include "options.h"
#include "progress_watch.h"
#include "thread_team.h"
#include "transport.h"

namespace weft::perf {

struct SizeResult {
  std::string test;
  size_t size = 0;
  int group = 0;       // grouped: receives per request (0: not grouped)
  int count = 0;       // timed messages per comm and direction
  double time_us = 0;  // per message (bw) / median half round trip (latency)
  double gbps = 0;     // decimal GB/s: all bytes moved / time
  double mmsgs = 0;    // million messages per second, all comms and directions
  bool has_latency = false;
  double min_us = 0, median_us = 0, avg_us = 0, p99_us = 0;
};

struct PatternContext {
  Transport& transport;
  Bootstrap& boot;
  const Options& opts;
  std::vector<std::unique_ptr<MessageBuffers>>& buffers;  // one per comm
  ProgressWatch& watch;  // the main thread's (checks the bootstrap)
  ThreadTeam& team;
  int rank;

  int comms() const { return static_cast<int>(buffers.size()); }
};

class Pattern {
 public:
  virtual ~Pattern() = default;
  virtual TestKind kind() const = 0;
  const char* name() const { return test_name(kind()); }
  virtual std::string title(const Options& opts) const = 0;  // one line for the report
  // Whether this pattern measures `size` (rate: small sizes only).
  virtual bool wants(const Options&, size_t) const { return true; }
  // Grouped: the group sizes to sweep; others: {0}.
  virtual std::vector<int> groups(const Options&, int) const { return {0}; }
  virtual SizeResult run(PatternContext& ctx, size_t size, int group) = 0;
};

std::unique_ptr<Pattern> make_pattern(TestKind kind);
std::unique_ptr<Pattern> make_latency_pattern();
std::unique_ptr<Pattern> make_stream_pattern(TestKind kind);  // bw, bibw, rate, grouped

// Shared by the patterns.
int timed_iterations(const Options& opts, size_t size);
int warmup_iterations(const Options& opts, size_t size);

// Posts until the transport accepts (nullptr = retry), testing nothing else.
void* post_send_blocking(Transport& t, ProgressWatch& watch, int comm, void* data, size_t size,
                         int tag, void* mr);
void* post_recv_blocking(Transport& t, ProgressWatch& watch, int comm, void* data, size_t size,
                         int tag, void* mr);
// Tests until done; returns the size reported (first receive).
int wait_request(Transport& t, ProgressWatch& watch, int comm, void* req, const char* what);
// Completion size check (cheap, done in the loop when checking).
void check_completion_size(const char* test, size_t expected, int got);

// After a size step: verify the receive slots this rank used on the first
// `comms_used` comms (if any), then exchange results with the peer; throws
// DataMismatch if either side failed.
void verify_and_exchange(PatternContext& ctx, const char* test, size_t size, size_t recv_slots,
                         int comms_used);

}  // namespace weft::perf
