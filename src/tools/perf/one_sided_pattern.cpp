// One-sided tests on the window both ranks opened (Backend::open_window):
//   put     rank 0 writes into rank 1's window. Latency: one put at a time,
//           from posting until test() says done; bandwidth: --depth puts in
//           flight over distinct slots. A last put with a signal tells rank
//           1 (which only drives progress) that everything is there; rank 1
//           then checks every slot written.
//   get     rank 0 reads rank 1's window, the same two figures; rank 0
//           checks what it read, then signals rank 1 as for put.
//   signal  ping-pong of put-with-signal from one half of the window (the
//           sender's pattern) into the other half of the peer's: each side
//           waits for its signal count to rise, then answers; half round
//           trip. Each signal must find its data in place: the receiver
//           checks the first and last word of the slot at once, then
//           poisons them, so a later signal that overtook its data fails.
#include <algorithm>
#include <chrono>
#include <cstring>
#include <span>
#include <vector>

#include "data_check.h"
#include "errors.h"
#include "pattern.h"

namespace weft::perf {
namespace {

using Clock = std::chrono::steady_clock;

// Where slot `slot` of messages of `size` bytes lies in the window.
size_t slot_offset(size_t slot, size_t size) {
  return kWindowDataOffset + slot * size;
}

// Distinct slots for `size`: up to --depth, within --buffer-bytes (at least
// one) and the window.
size_t slot_count(const PatternContext& ctx, size_t size) {
  if (size == 0) return 1;
  size_t by_buffer = std::max<size_t>(1, ctx.opts.buffer_bytes / size);
  size_t by_window = (ctx.window_bytes - kWindowDataOffset) / size;
  return std::max<size_t>(1, std::min({static_cast<size_t>(ctx.opts.depth), by_buffer, by_window}));
}

void wait_done(PatternContext& ctx, void* req, const char* what) {
  while (!ctx.backend.test_one_sided(req)) ctx.watch.idle(what);
  ctx.watch.progressed();
}

void* put_blocking(PatternContext& ctx, size_t local, size_t remote, size_t size, bool signal) {
  for (;;) {
    if (void* r = ctx.backend.post_put(local, remote, size, signal)) return r;
    ctx.watch.idle("posting a put");
  }
}

void* get_blocking(PatternContext& ctx, size_t offset, size_t size) {
  for (;;) {
    if (void* r = ctx.backend.post_get(offset, offset, size)) return r;
    ctx.watch.idle("posting a get");
  }
}

// Progress until this rank has seen one more signal than before.
void await_signal(PatternContext& ctx, const char* what) {
  ++ctx.signals_expected;
  while (ctx.backend.signals_arrived() < ctx.signals_expected) ctx.watch.idle(what);
  ctx.watch.progressed();
}

// The first mismatch in slots [0, slots) against `sender`'s pattern.
SlotStatus check_slots(const PatternContext& ctx, int sender, size_t size, size_t slots) {
  SlotStatus status;
  if (!ctx.opts.check) return status;
  for (size_t slot = 0; slot < slots; ++slot) {
    const uint64_t key = pattern_key(sender, size, slot);
    const char* data = ctx.window + slot_offset(slot, size);
    size_t off = find_mismatch(data, size, key);
    if (off != SIZE_MAX) {
      return SlotStatus{off, 0, slot, static_cast<uint8_t>(data[off]), expected_byte(key, off)};
    }
  }
  return status;
}

void fill_slots(const PatternContext& ctx, int sender, size_t size, size_t slots) {
  for (size_t slot = 0; slot < slots; ++slot) {
    fill_pattern(ctx.window + slot_offset(slot, size), size, pattern_key(sender, size, slot));
  }
}

void poison_slots(const PatternContext& ctx, size_t size, size_t slots) {
  poison(ctx.window + slot_offset(0, size), slots * size);
}

double seconds_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

class OneSidedPattern final : public Pattern {
 public:
  explicit OneSidedPattern(TestKind kind) : kind_(kind) {}
  TestKind kind() const override { return kind_; }

  std::string title(const Options& opts) const override {
    switch (kind_) {
      case TestKind::put:
        return "put: rank 0 writes rank 1's window; latency = one put until done, bw(GB/s) = " +
               std::to_string(opts.depth) + " in flight";
      case TestKind::get:
        return "get: rank 0 reads rank 1's window; latency = one get until done, bw(GB/s) = " +
               std::to_string(opts.depth) + " in flight";
      default:
        return "signal: ping-pong of put + signal, half round trip (the receiver polls its "
               "signal)";
    }
  }

  std::vector<SizeResult> run(PatternContext& ctx, size_t size, int) override {
    if (slot_offset(0, size) + size > ctx.window_bytes) {
      throw PerfError(std::string(name()) + ": " + std::to_string(size) +
                      " bytes do not fit the window");
    }
    const int iters = timed_iterations(ctx.opts, size);
    const int warmup = warmup_iterations(ctx.opts, size);
    samples_.assign(static_cast<size_t>(iters), 0.0);  // allocated before timing
    ctx.watch.reset();
    SizeResult r;
    r.test = name();
    r.size = size;
    r.count = iters;
    if (kind_ == TestKind::signal) {
      ping_pong(ctx, size, warmup, iters);
      if (ctx.rank == 0) {
        summarize_latency(samples_, r);
        r.gbps = r.median_us > 0 ? static_cast<double>(size) / (r.median_us * 1e3) : 0;
      }
      return {r};
    }
    const size_t slots = slot_count(ctx, size);
    // Slots the bandwidth loop writes (or reads), slot 0 at least.
    const size_t touched = std::min(slots, static_cast<size_t>(iters));
    const bool put = kind_ == TestKind::put;
    if (ctx.rank == 1) {
      // put: poisoned here, written by rank 0; get: rank 0 reads these.
      if (ctx.opts.check) {
        if (put) poison_slots(ctx, size, slots);
        if (!put) fill_slots(ctx, 1, size, slots);
      }
      ctx.boot.send_pod<uint32_t>(MsgKind::ready, 1);
      await_signal(ctx, put ? "waiting for rank 0's puts" : "waiting for rank 0's gets");
      exchange_status(ctx, name(), size, put ? check_slots(ctx, 0, size, touched) : SlotStatus{});
      return {r};
    }
    if (ctx.opts.check) {
      if (put) fill_slots(ctx, 0, size, slots);
      if (!put) poison_slots(ctx, size, slots);
    }
    ctx.boot.recv_pod<uint32_t>(MsgKind::ready);
    for (int i = 0; i < warmup + iters; ++i) {
      const auto t0 = Clock::now();
      void* req = put ? put_blocking(ctx, slot_offset(0, size), slot_offset(0, size), size, false)
                      : get_blocking(ctx, slot_offset(0, size), size);
      wait_done(ctx, req, put ? "waiting for a put" : "waiting for a get");
      if (i >= warmup) {
        samples_[static_cast<size_t>(i - warmup)] =
            std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
      }
    }
    summarize_latency(samples_, r);
    const double seconds = stream(ctx, size, slots, iters, put);
    r.gbps = seconds > 0 ? static_cast<double>(size) * iters / seconds / 1e9 : 0;
    SlotStatus mine = put ? SlotStatus{} : check_slots(ctx, 1, size, touched);
    // Everything rank 0 did is complete here; the signal lets rank 1 go on
    // (a put of at most 8 bytes: it only carries the signal).
    const size_t first = slot_offset(0, size);
    wait_done(ctx, put_blocking(ctx, first, first, std::min<size_t>(size, 8), true),
              "signalling rank 1");
    exchange_status(ctx, name(), size, mine);
    return {r};
  }

 private:
  // `iters` operations with up to --depth in flight, slots in turn;
  // returns the seconds from the first post to the last completion.
  double stream(PatternContext& ctx, size_t size, size_t slots, int iters, bool put) {
    const size_t depth = static_cast<size_t>(ctx.opts.depth);
    inflight_.assign(depth, nullptr);
    size_t posted = 0, done = 0;
    const size_t total = static_cast<size_t>(iters);
    const auto t0 = Clock::now();
    while (done < total) {
      while (posted < total && posted - done < depth) {
        const size_t offset = slot_offset(posted % slots, size);
        void* req = put ? ctx.backend.post_put(offset, offset, size, false)
                        : ctx.backend.post_get(offset, offset, size);
        if (req == nullptr) break;
        inflight_[posted % depth] = req;
        ++posted;
      }
      // In posting order: an operation done before an older one waits here
      // (the backends complete in any order).
      if (posted > done && ctx.backend.test_one_sided(inflight_[done % depth])) {
        ++done;
        ctx.watch.progressed();
      } else {
        ctx.watch.idle(put ? "streaming puts" : "streaming gets");
      }
    }
    return seconds_between(t0, Clock::now());
  }

  // Outbox slots 0 and 1 (this rank's pattern) alternate, each put into
  // the peer's inbox slot of the same number (after the outboxes). Rank 0
  // pings and times; rank 1 answers each signal with its own.
  void ping_pong(PatternContext& ctx, size_t size, int warmup, int iters) {
    const size_t slots = size == 0 ? 1 : std::min<size_t>(2, slot_count(ctx, size) / 2);
    if (slots == 0) {
      throw PerfError("signal: two messages of " + std::to_string(size) +
                      " bytes do not fit the window");
    }
    const int peer = 1 - ctx.rank;
    if (ctx.opts.check) {
      fill_slots(ctx, ctx.rank, size, slots);
      poison(ctx.window + slot_offset(slots, size), slots * size);
    }
    ctx.boot.send_pod<uint32_t>(MsgKind::ready, 1);
    ctx.boot.recv_pod<uint32_t>(MsgKind::ready);
    SlotStatus mine;
    for (int i = 0; i < warmup + iters; ++i) {
      const size_t slot = static_cast<size_t>(i) % slots;
      const size_t outbox = slot_offset(slot, size);
      const size_t inbox = slot_offset(slots + slot, size);
      const auto t0 = Clock::now();
      void* req = nullptr;
      if (ctx.rank == 0) req = put_blocking(ctx, outbox, inbox, size, true);
      ++ctx.signals_expected;
      while (ctx.backend.signals_arrived() < ctx.signals_expected) {
        if (req != nullptr && ctx.backend.test_one_sided(req)) req = nullptr;
        ctx.watch.idle("waiting for the peer's signal");
      }
      ctx.watch.progressed();
      if (ctx.opts.check && mine.offset == UINT64_MAX) {
        mine = check_edges(ctx.window + inbox, peer, size, slot);
      }
      if (ctx.rank == 1) req = put_blocking(ctx, outbox, inbox, size, true);
      if (req != nullptr) wait_done(ctx, req, "completing a signalled put");
      if (ctx.rank == 0 && i >= warmup) {
        samples_[static_cast<size_t>(i - warmup)] =
            std::chrono::duration<double, std::micro>(Clock::now() - t0).count() / 2;
      }
    }
    exchange_status(ctx, name(), size, mine);
  }

  // The first and last word of a signalled message (all of it would cost
  // the latency being measured), then poisoned for the next round.
  static SlotStatus check_edges(char* data, int sender, size_t size, size_t slot) {
    SlotStatus status;
    if (size == 0) return status;
    const uint64_t key = pattern_key(sender, size, slot);
    // Word-aligned starts, as the pattern is made of 8-byte words.
    const size_t last = (size - 1) & ~size_t{7};
    const size_t starts[2] = {0, last};
    for (size_t at : std::span(starts, last == 0 ? 1 : 2)) {
      const size_t len = std::min<size_t>(8, size - at);
      size_t off = find_mismatch_at(data + at, len, key, at);
      if (off != SIZE_MAX && status.offset == UINT64_MAX) {
        off += at;
        status = SlotStatus{off, 0, slot, static_cast<uint8_t>(data[off]), expected_byte(key, off)};
      }
      poison(data + at, len);
    }
    return status;
  }

  TestKind kind_;
  std::vector<double> samples_;
  std::vector<void*> inflight_;
};

}  // namespace

std::unique_ptr<Pattern> make_one_sided_pattern(TestKind kind) {
  return std::make_unique<OneSidedPattern>(kind);
}

}  // namespace weft::perf
