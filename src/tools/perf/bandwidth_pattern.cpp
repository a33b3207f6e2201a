// Unidirectional bandwidth, NCCL-like: rank 1 keeps up to --depth receives
// posted, rank 0 keeps up to --depth sends in flight, both test() their
// oldest request in a loop. A NULL request from the transport means "no
// resources now": keep testing and post again. The sender's clock runs from
// the first send to the receiver's acknowledgement (an 8-byte message sent
// once everything arrived), so it measures delivered bytes, not buffered.
#include <algorithm>
#include <chrono>
#include <vector>

#include "pattern.h"

namespace weft::perf {
namespace {

class BandwidthPattern final : public Pattern {
 public:
  const char* name() const override { return "bw"; }
  const char* title() const override { return "bw: unidirectional bandwidth, rank 0 -> rank 1"; }

  SizeResult run(PatternContext& ctx, size_t size) override {
    const int iters = timed_iterations(ctx.opts, size);
    const int warmup = warmup_iterations(ctx.opts, size);
    const size_t slots = ctx.buffers.slots(size);
    ring_.assign(static_cast<size_t>(ctx.opts.depth), nullptr);
    ctx.watch.reset();

    double elapsed_us = 0;
    size_t used_slots = 0;
    if (ctx.rank == 0) {
      if (ctx.opts.check) ctx.buffers.fill_send(0, size, slots);
      if (warmup > 0) send_phase(ctx, size, slots, warmup);
      elapsed_us = send_phase(ctx, size, slots, iters);
    } else {
      used_slots = std::min(slots, static_cast<size_t>(std::max(warmup, iters)));
      if (ctx.opts.check) ctx.buffers.poison_recv(size, used_slots);
      if (warmup > 0) recv_phase(ctx, size, slots, warmup);
      recv_phase(ctx, size, slots, iters);
    }
    verify_and_exchange(ctx, name(), size, used_slots);

    SizeResult r;
    r.test = name();
    r.size = size;
    r.count = iters;
    if (ctx.rank == 0) {
      r.time_us = elapsed_us / iters;
      r.gbps = static_cast<double>(size) * iters / (elapsed_us * 1e3);
    }
    return r;
  }

 private:
  // Returns microseconds from the first send to the acknowledgement.
  double send_phase(PatternContext& ctx, size_t size, size_t slots, int n) {
    Transport& t = ctx.transport;
    const size_t depth = ring_.size();
    void* ack = post_recv_blocking(ctx, ctx.buffers.recv_ctrl(), MessageBuffers::kCtrlBytes,
                                   ctx.buffers.recv_mr());
    ctx.boot.recv_pod<uint32_t>(MsgKind::ready);

    auto t0 = std::chrono::steady_clock::now();
    int posted = 0;
    int completed = 0;
    size_t head = 0;
    size_t inflight = 0;
    size_t got = 0;
    while (completed < n) {
      while (posted < n && inflight < depth) {
        size_t slot = static_cast<size_t>(posted) % slots;
        void* req = t.post_send(ctx.buffers.send_slot(size, slot), size, ctx.buffers.send_mr());
        if (req == nullptr) break;
        ring_[(head + inflight) % depth] = req;
        ++inflight;
        ++posted;
      }
      bool any = false;
      while (inflight > 0 && t.test(ring_[head], &got)) {
        head = (head + 1) % depth;
        --inflight;
        ++completed;
        any = true;
      }
      if (any) {
        ctx.watch.progressed();
      } else {
        ctx.watch.idle("sending");
      }
    }
    wait_request(ctx, ack, "waiting for the receiver's acknowledgement");
    auto t1 = std::chrono::steady_clock::now();
    return std::chrono::duration<double, std::micro>(t1 - t0).count();
  }

  void recv_phase(PatternContext& ctx, size_t size, size_t slots, int n) {
    Transport& t = ctx.transport;
    const bool check = ctx.opts.check;
    const size_t depth = ring_.size();
    int posted = 0;
    int completed = 0;
    size_t head = 0;
    size_t inflight = 0;
    size_t got = 0;
    auto fill = [&] {
      while (posted < n && inflight < depth) {
        size_t slot = static_cast<size_t>(posted) % slots;
        void* req = t.post_recv(ctx.buffers.recv_slot(size, slot), size, ctx.buffers.recv_mr());
        if (req == nullptr) break;
        ring_[(head + inflight) % depth] = req;
        ++inflight;
        ++posted;
      }
    };
    fill();  // pre-post before telling the sender to go
    ctx.boot.send_pod<uint32_t>(MsgKind::ready, 1);
    while (completed < n) {
      bool any = false;
      while (inflight > 0 && t.test(ring_[head], &got)) {
        if (check) check_completion_size("bw", size, got);
        head = (head + 1) % depth;
        --inflight;
        ++completed;
        any = true;
      }
      fill();
      if (any) {
        ctx.watch.progressed();
      } else {
        ctx.watch.idle("receiving");
      }
    }
    void* ack = post_send_blocking(ctx, ctx.buffers.send_ctrl(), MessageBuffers::kCtrlBytes,
                                   ctx.buffers.send_mr());
    wait_request(ctx, ack, "sending the acknowledgement");
  }

  std::vector<void*> ring_;
};

}  // namespace

std::unique_ptr<Pattern> make_bandwidth_pattern() {
  return std::make_unique<BandwidthPattern>();
}

}  // namespace weft::perf
