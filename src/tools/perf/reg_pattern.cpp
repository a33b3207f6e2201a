// reg: what registering memory costs through the backend (ncclNet regMr,
// or regMrDmaBuf with --dmabuf, then deregMr) on rank 0's send comm 0;
// rank 1 only waits for rank 0 to finish each pattern. Every size gets a
// fresh allocation (page-aligned host memory, or GPU memory with --mem
// cuda), freed after both patterns:
//   fresh  N x { reg(buf); dereg }: no other registration of buf is alive,
//          so no registration cache can help; what a registration costs.
//   reuse  reg(buf) held; N x { reg(buf, every other time an interior
//          range of it); dereg }; then the held one released. NCCL's
//          pattern: the same buffers registered again by other comms and
//          by user-buffer registration while one registration stays alive.
//          A cache (weft's, WEFT_MR_CACHE=1) answers these from memory.
// Each pair is timed on its own (with --dmabuf the dma-buf export and the
// close of its fd are inside the pair, as NCCL does both per
// registration). N: at most --iters, at least 10 unless --iters is smaller;
// a pattern stops once it ran kStepSeconds with those done (or a third of
// --timeout, so that rank 1's wait never times out).
#include <algorithm>
#include <chrono>
#include <cstring>
#include <vector>

#include "gpu_buffer.h"
#include "host_buffer.h"
#include "pattern.h"

namespace weft::perf {
namespace {

using Clock = std::chrono::steady_clock;

constexpr size_t kPage = 4096;
constexpr int kMinPairs = 10;
constexpr double kStepSeconds = 1.0;

// One size step's buffer: host or GPU memory, whole pages.
struct RegBuffer {
  HostBuffer host;
  GpuBuffer gpu;
  char* data = nullptr;
};

class RegPattern final : public Pattern {
 public:
  TestKind kind() const override { return TestKind::reg; }

  std::string title(const Options& opts) const override {
    std::string mem = opts.mem == MemType::cuda ? "GPU memory" : "host memory";
    std::string call = opts.dmabuf ? "regMrDmaBuf" : "regMr";
    return "reg: " + call + "+deregMr pairs on rank 0's send comm, " + mem +
           " (fresh: no other registration alive; reuse: one registration held)";
  }

  std::vector<size_t> sizes(const Options& opts) const override {
    std::vector<size_t> s =
        size_sweep(opts.reg_min_bytes, opts.reg_max_bytes, opts.reg_step_factor);
    s.erase(std::remove(s.begin(), s.end(), size_t{0}), s.end());  // nothing to register
    return s;
  }

  int planned_iterations(const Options&, size_t) const override { return 0; }

  std::vector<SizeResult> run(PatternContext& ctx, size_t size, int) override {
    std::vector<SizeResult> rows;
    if (ctx.rank != 0) {
      for (const char* p : {"fresh", "reuse"}) {
        ctx.boot.recv_pod<uint32_t>(MsgKind::status);  // rank 0 finished this pattern
        SizeResult r;
        r.test = name();
        r.size = size;
        r.pattern = p;
        rows.push_back(r);
      }
      return rows;
    }
    RegBuffer buf = allocate(ctx, size);
    for (bool reuse : {false, true}) {
      rows.push_back(measure(ctx, buf, size, reuse));
      ctx.boot.send_pod<uint32_t>(MsgKind::status, 1);
    }
    return rows;
  }

 private:
  static RegBuffer allocate(PatternContext& ctx, size_t size) {
    RegBuffer b;
    const size_t bytes = (size + kPage - 1) / kPage * kPage;
    if (ctx.gpu()) {
      b.gpu = GpuBuffer(*ctx.cuda, bytes);
      b.data = b.gpu.data();
    } else {
      b.host = HostBuffer(bytes);
      b.data = b.host.data();
      memset(b.data, 0, bytes);  // resident, like a buffer in use
    }
    return b;
  }

  // One registration of [data, data + len) inside `buf`.
  static void* reg(PatternContext& ctx, const RegBuffer& buf, char* data, size_t len) {
    Backend& backend = ctx.backend;
    if (ctx.opts.dmabuf) {
      Fd fd = buf.gpu.export_dmabuf();  // closed right after the call, as NCCL does
      return backend.register_dmabuf(0, Direction::send, data, len,
                                     static_cast<uint64_t>(data - buf.data), fd.get());
    }
    return backend.register_memory(0, Direction::send, data, len,
                                   ctx.gpu() ? MemoryKind::cuda : MemoryKind::host);
  }

  static void dereg(PatternContext& ctx, void* handle) {
    ctx.backend.deregister_memory(0, Direction::send, handle);
  }

  SizeResult measure(PatternContext& ctx, const RegBuffer& buf, size_t size, bool reuse) {
    // reuse: every other pair registers an interior range (a page in from
    // both ends) where the buffer has room for one.
    const bool interior = reuse && size >= 3 * kPage;
    const int max_pairs = ctx.opts.iters;
    const int min_pairs = std::min(kMinPairs, max_pairs);
    const double limit_s = std::max(kStepSeconds, ctx.opts.timeout_s / 3.0);
    samples_.clear();
    samples_.reserve(static_cast<size_t>(std::min(max_pairs, 1 << 20)));

    void* held_handle = nullptr;
    if (reuse) held_handle = reg(ctx, buf, buf.data, size);
    try {
      if (ctx.opts.warmup > 0) dereg(ctx, reg(ctx, buf, buf.data, size));
      const Clock::time_point start = Clock::now();
      for (int i = 0; i < max_pairs; ++i) {
        const bool inner = interior && (i % 2) == 1;
        char* data = inner ? buf.data + kPage : buf.data;
        const size_t len = inner ? size - 2 * kPage : size;
        Clock::time_point t0 = Clock::now();
        void* h = reg(ctx, buf, data, len);
        dereg(ctx, h);
        Clock::time_point t1 = Clock::now();
        samples_.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
        const double ran = std::chrono::duration<double>(t1 - start).count();
        if ((i + 1 >= min_pairs && ran >= kStepSeconds) || ran >= limit_s) break;
      }
    } catch (...) {
      if (held_handle != nullptr) dereg(ctx, held_handle);
      throw;
    }
    if (held_handle != nullptr) dereg(ctx, held_handle);

    SizeResult r;
    r.test = name();
    r.size = size;
    r.pattern = reuse ? "reuse" : "fresh";
    r.count = static_cast<int>(samples_.size());
    double sum = 0;
    for (double v : samples_) sum += v;
    summarize_latency(samples_, r);
    r.regs_per_s = sum > 0 ? static_cast<double>(samples_.size()) * 1e6 / sum : 0;
    r.gbps = r.median_us > 0 ? static_cast<double>(size) / (r.median_us * 1e3) : 0;
    return r;
  }

  std::vector<double> samples_;
};

}  // namespace

std::unique_ptr<Pattern> make_reg_pattern() {
  return std::make_unique<RegPattern>();
}

}  // namespace weft::perf
