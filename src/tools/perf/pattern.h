// Pattern: one kind of measurement (latency, bandwidth, bidirectional,
// message rate, grouped receives, registration), run one size step at a
// time on both ranks against any Backend, over --comms comms driven by
// --threads threads. Rank 0 drives and gets the figures.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backend.h"
#include "bootstrap.h"
#include "message_buffers.h"
#include "options.h"
#include "progress_watch.h"
#include "thread_team.h"

namespace weft::cuda {
class Driver;
}

namespace weft::perf {

struct SizeResult {
  std::string test;
  size_t size = 0;
  int group = 0;             // grouped: receives per request (0: not grouped)
  std::string pattern;       // reg: "fresh" or "reuse" (empty otherwise)
  int count = 0;             // timed messages per comm and direction
  double time_us = 0;        // per message (bw) / median half round trip (latency)
  double gbps = 0;           // decimal GB/s: all bytes moved / time
  double mmsgs = 0;          // million messages per second, all comms and directions
  bool has_latency = false;  // min/median/avg/p99 (latency: half round trip; reg: per pair)
  double min_us = 0, median_us = 0, avg_us = 0, p99_us = 0;
  double regs_per_s = 0;  // reg: regMr+deregMr pairs per second
};

// iflush calls after receives into GPU memory, over all comms and threads.
struct FlushCounters {
  std::atomic<uint64_t> issued{0};    // iflush calls
  std::atomic<uint64_t> requests{0};  // ... that returned a request (NULL: nothing to flush)
};

struct PatternContext {
  Backend& backend;
  Bootstrap& boot;
  const Options& opts;
  std::vector<std::unique_ptr<MessageBuffers>>& buffers;  // one per comm (none for reg alone)
  ProgressWatch& watch;  // the main thread's (checks the bootstrap)
  ThreadTeam& team;
  int rank;
  const cuda::Driver* cuda = nullptr;  // --mem cuda
  FlushCounters* flushes = nullptr;
  bool plugin = true;  // the plugin's run, not the raw provider's
  // One-sided tests: the window both ranks opened (backend.h), and the
  // signals this rank has been sent so far in the run.
  char* window = nullptr;
  size_t window_bytes = 0;
  uint64_t signals_expected = 0;

  int comms() const { return static_cast<int>(buffers.size()); }
  bool gpu() const { return opts.mem == MemType::cuda; }
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
  // The message sizes (reg: its own sweep).
  virtual std::vector<size_t> sizes(const Options& opts) const;
  // For progress lines: timed iterations at `size` (0: not known in advance).
  virtual int planned_iterations(const Options& opts, size_t size) const;
  // One size step: a result row per measurement (reg: fresh and reuse).
  virtual std::vector<SizeResult> run(PatternContext& ctx, size_t size, int group) = 0;
};

std::unique_ptr<Pattern> make_pattern(TestKind kind);
std::unique_ptr<Pattern> make_latency_pattern();
// --samples: creates the file with its header (rank 0, before any run), so
// a path that cannot be written fails before anything is measured.
void start_latency_samples(const std::string& path);
std::unique_ptr<Pattern> make_stream_pattern(TestKind kind);  // bw, bibw, rate, grouped
std::unique_ptr<Pattern> make_reg_pattern();
std::unique_ptr<Pattern> make_one_sided_pattern(TestKind kind);  // put, get, signal

// Shared by the patterns.
int timed_iterations(const Options& opts, size_t size);
int warmup_iterations(const Options& opts, size_t size);

// Posts until the backend accepts (nullptr = retry), testing nothing else.
void* post_send_blocking(Backend& backend, ProgressWatch& watch, int comm, void* data, size_t size,
                         int tag, void* mr);
void* post_recv_blocking(Backend& backend, ProgressWatch& watch, int comm, void* data, size_t size,
                         int tag, void* mr);
// Tests until done; returns the size reported (first receive).
int wait_request(Backend& backend, ProgressWatch& watch, int comm, void* req, const char* what);
// Completion size check (cheap, done in the loop when checking).
void check_completion_size(const char* test, size_t expected, int got);

// After a receive into GPU memory completed: iflush the n buffers with the
// sizes received (as NCCL's proxy does, only when they total more than 0
// bytes) and count it. Returns the flush request to test to completion
// before the buffers are used, or nullptr when there is nothing to flush.
void* start_flush(Backend& backend, FlushCounters* counters, int comm, int n, void** data,
                  int* sizes, void** mrs);
// start_flush, then test until done.
void flush_blocking(Backend& backend, FlushCounters* counters, ProgressWatch& watch, int comm,
                    int n, void** data, int* sizes, void** mrs);

// Sorts `samples` (microseconds, at least one) and sets r's min, median,
// average and p99, time_us (the median) and has_latency.
void summarize_latency(std::vector<double>& samples, SizeResult& r);

// A size step's verification result, sent to the peer; offset all-ones
// means "no mismatch".
struct SlotStatus {
  uint64_t offset = UINT64_MAX;
  uint64_t comm = 0;
  uint64_t slot = 0;
  uint64_t got = 0;
  uint64_t expected = 0;
};
// Sends ours, receives the peer's; throws DataMismatch if either failed.
void exchange_status(PatternContext& ctx, const char* test, size_t size, const SlotStatus& mine);

// After a size step: verify the receive slots this rank used on the first
// `comms_used` comms (if any), then exchange results with the peer; throws
// DataMismatch if either side failed.
void verify_and_exchange(PatternContext& ctx, const char* test, size_t size, size_t recv_slots,
                         int comms_used);

}  // namespace weft::perf
