// Ping-pong: rank 0 posts its receive, sends, waits for both; rank 1 echoes.
// One message in flight; rank 0 times every iteration and reports the half
// round trip. Rank 1 re-posts its next receive right after sending, so the
// next ping never lands on an unposted receive. Runs on comm 0 only. With
// GPU memory each receive is flushed (iflush) before it counts as done, as
// NCCL's proxy does before handing the data to the GPU.
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "pattern.h"

namespace weft::perf {
namespace {

// Two slots, alternated, so consecutive messages carry different patterns.
constexpr size_t kLatencySlots = 2;

class LatencyPattern final : public Pattern {
 public:
  TestKind kind() const override { return TestKind::latency; }
  std::string title(const Options&) const override {
    return "latency: ping-pong on one comm, half round trip";
  }

  std::vector<SizeResult> run(PatternContext& ctx, size_t size, int) override {
    const int iters = timed_iterations(ctx.opts, size);
    const int warmup = warmup_iterations(ctx.opts, size);
    MessageBuffers& buffers = *ctx.buffers[0];
    const size_t slots = std::min(kLatencySlots, buffers.slots(size));
    if (ctx.opts.check) {
      buffers.fill_send(ctx.rank, size, slots);
      buffers.poison_recv(size, slots);
    }
    samples_.assign(static_cast<size_t>(iters), 0.0);  // allocated before timing
    ctx.watch.reset();
    if (ctx.rank == 0) {
      ctx.boot.recv_pod<uint32_t>(MsgKind::ready);
      ping(ctx, size, slots, warmup, false);
      ping(ctx, size, slots, iters, true);
    } else {
      pong(ctx, size, slots, warmup + iters);
    }
    verify_and_exchange(ctx, name(), size, slots, /*comms_used=*/1);

    SizeResult r;
    r.test = name();
    r.size = size;
    r.count = iters;
    r.has_latency = true;
    if (ctx.rank == 0) {
      if (!ctx.opts.samples_path.empty()) write_samples(ctx.opts.samples_path, ctx.plugin, size);
      summarize_latency(samples_, r);
      r.gbps = static_cast<double>(size) / (r.median_us * 1e3);
    }
    return {r};
  }

 private:
  // In iteration order, before they are sorted, after what
  // start_latency_samples wrote: every size of both runs of --vs-raw.
  void write_samples(const std::string& path, bool plugin, size_t size) const {
    FILE* out = std::fopen(path.c_str(), "a");
    if (out == nullptr) throw PerfError("--samples " + path + ": " + std::strerror(errno));
    const char* run = plugin ? "plugin" : "raw";
    for (size_t i = 0; i < samples_.size(); ++i) {
      std::fprintf(out, "%s,%zu,%zu,%.4f\n", run, size, i, samples_[i]);
    }
    if (std::fclose(out) != 0) throw PerfError("--samples " + path + ": write failed");
  }

  void ping(PatternContext& ctx, size_t size, size_t slots, int n, bool timed) {
    const bool check = ctx.opts.check;
    const bool gpu = ctx.buffers[0]->gpu();
    Backend& backend = ctx.backend;
    MessageBuffers& b = *ctx.buffers[0];
    int got[kMaxGroup] = {};
    for (int i = 0; i < n; ++i) {
      size_t slot = static_cast<size_t>(i) % slots;
      void* rdata = b.recv_slot(size, slot);
      void* rmr = b.recv_mr();
      auto t0 = std::chrono::steady_clock::now();
      void* rreq = post_recv_blocking(backend, ctx.watch, 0, rdata, size, 0, rmr);
      void* sreq =
          post_send_blocking(backend, ctx.watch, 0, b.send_slot(size, slot), size, 0, b.send_mr());
      bool sent = false;
      bool received = false;
      void* flush = nullptr;  // GPU memory: the flush of the echo, until done
      while (!(sent && received && flush == nullptr)) {
        if (!sent) sent = backend.test(0, sreq, got);
        if (!received) {
          received = backend.test(0, rreq, got);
          if (received) {
            if (check) check_completion_size("latency", size, got[0]);
            if (gpu) flush = start_flush(backend, ctx.flushes, 0, 1, &rdata, got, &rmr);
          }
        } else if (flush != nullptr && backend.test(0, flush, got)) {
          flush = nullptr;
        }
        ctx.watch.idle("waiting for the echo");
      }
      auto t1 = std::chrono::steady_clock::now();
      ctx.watch.progressed();
      if (timed) {
        samples_[static_cast<size_t>(i)] =
            std::chrono::duration<double, std::micro>(t1 - t0).count() / 2;
      }
    }
  }

  void pong(PatternContext& ctx, size_t size, size_t slots, int n) {
    const bool check = ctx.opts.check;
    const bool gpu = ctx.buffers[0]->gpu();
    Backend& backend = ctx.backend;
    MessageBuffers& b = *ctx.buffers[0];
    void* rreq =
        post_recv_blocking(backend, ctx.watch, 0, b.recv_slot(size, 0), size, 0, b.recv_mr());
    ctx.boot.send_pod<uint32_t>(MsgKind::ready, 1);
    for (int i = 0; i < n; ++i) {
      size_t slot = static_cast<size_t>(i) % slots;
      int got = wait_request(backend, ctx.watch, 0, rreq, "waiting for a ping");
      if (check) check_completion_size("latency", size, got);
      if (gpu) {
        void* data = b.recv_slot(size, static_cast<size_t>(i) % slots);
        void* mr = b.recv_mr();
        flush_blocking(backend, ctx.flushes, ctx.watch, 0, 1, &data, &got, &mr);
      }
      void* sreq =
          post_send_blocking(backend, ctx.watch, 0, b.send_slot(size, slot), size, 0, b.send_mr());
      if (i + 1 < n) {
        size_t next = static_cast<size_t>(i + 1) % slots;
        rreq = post_recv_blocking(backend, ctx.watch, 0, b.recv_slot(size, next), size, 0,
                                  b.recv_mr());
      }
      wait_request(backend, ctx.watch, 0, sreq, "sending the echo");
    }
  }

  std::vector<double> samples_;
};

}  // namespace

std::unique_ptr<Pattern> make_latency_pattern() {
  return std::make_unique<LatencyPattern>();
}

void start_latency_samples(const std::string& path) {
  FILE* out = std::fopen(path.c_str(), "w");
  if (out == nullptr) throw PerfError("--samples " + path + ": " + std::strerror(errno));
  const bool written = std::fputs("run,size,iteration,half_rtt_us\n", out) >= 0;
  if (std::fclose(out) != 0 || !written) throw PerfError("--samples " + path + ": write failed");
}

}  // namespace weft::perf
