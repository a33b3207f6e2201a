// Streaming patterns, NCCL-like: up to --depth requests in flight per comm,
// --comms comms driven by --threads threads.
//   bw       rank 0 sends, rank 1 receives; rank 0's clock runs from the
//            start signal to the receiver's acknowledgement on every comm (an
//            8-byte message sent once everything arrived), so it measures
//            delivered bytes, not buffered ones.
//   bibw     both ranks send and receive at once; each rank's clock runs
//            until its own sends and receives are done; the slower rank's
//            time counts. Bandwidth is both directions together.
//   rate     bw for small sizes (<= --rate-max-bytes), read as messages/s.
//   grouped  bw where each receive request is a group of n receives with
//            tags 0..n-1 (ncclNet grouped irecv); the sender cycles the tags.
// With GPU memory every completed receive request is flushed (iflush) before
// its slots count as free; acknowledgements stay in host memory.
#include <algorithm>
#include <chrono>
#include <vector>

#include "message_stream.h"
#include "pattern.h"

namespace weft::perf {
namespace {

using Clock = std::chrono::steady_clock;

constexpr int kCtrlTag = 1 << 20;  // acknowledgements; never a data tag

int round_up(int v, int to) {
  return (v + to - 1) / to * to;
}

class StreamPattern final : public Pattern {
 public:
  explicit StreamPattern(TestKind kind) : kind_(kind) {}

  TestKind kind() const override { return kind_; }

  std::string title(const Options& opts) const override {
    std::string where = ", " + std::to_string(opts.depth) + " requests in flight per comm, " +
                        std::to_string(opts.comms) + " comm(s), " + std::to_string(opts.threads) +
                        " thread(s)";
    switch (kind_) {
      case TestKind::bibw:
        return "bibw: bidirectional bandwidth, both ranks send and receive (sum of both)" + where;
      case TestKind::rate:
        return "rate: message rate, rank 0 -> rank 1" + where;
      case TestKind::grouped:
        return "grouped: unidirectional bandwidth into grouped receives (n per request)" + where;
      default:
        return "bw: unidirectional bandwidth, rank 0 -> rank 1" + where;
    }
  }

  bool wants(const Options& opts, size_t size) const override {
    return kind_ != TestKind::rate || size <= opts.rate_max_bytes;
  }

  std::vector<int> groups(const Options& opts, int max_recvs) const override {
    if (kind_ != TestKind::grouped) return {0};
    if (opts.group != 0) return {opts.group};
    std::vector<int> g;
    for (int n = 1; n < max_recvs; n *= 2) g.push_back(n);
    g.push_back(max_recvs);
    return g;
  }

  std::vector<SizeResult> run(PatternContext& ctx, size_t size, int group) override {
    const int g = std::max(group, 1);
    const int iters = round_up(timed_iterations(ctx.opts, size), g);
    const int warmup = round_up(warmup_iterations(ctx.opts, size), g);
    const bool bidir = kind_ == TestKind::bibw;
    const bool sends = bidir || ctx.rank == 0;
    const bool recvs = bidir || ctx.rank == 1;
    const size_t slots = ctx.buffers[0]->slots(size);
    const size_t used_slots =
        recvs ? std::min(slots, static_cast<size_t>(std::max(warmup, iters))) : 0;
    if (ctx.opts.check) {
      for (auto& b : ctx.buffers) {
        if (sends) b->fill_send(ctx.rank, size, slots);
        if (recvs) b->poison_recv(size, used_slots);
      }
    }
    StreamSpec spec{name(),         size,           slots,     0,          g,
                    ctx.opts.depth, ctx.opts.check, ctx.gpu(), ctx.flushes};
    if (warmup > 0) {
      spec.messages = warmup;
      phase(ctx, spec, sends, recvs);
    }
    spec.messages = iters;
    double elapsed_us = phase(ctx, spec, sends, recvs);
    if (bidir) {
      // The slower rank's time: both directions are done only then.
      ctx.boot.send_pod(MsgKind::status, elapsed_us);
      elapsed_us = std::max(elapsed_us, ctx.boot.recv_pod<double>(MsgKind::status));
    }
    verify_and_exchange(ctx, name(), size, used_slots, ctx.comms());

    SizeResult r;
    r.test = name();
    r.size = size;
    r.group = group;
    r.count = iters;
    if (ctx.rank == 0) {
      double messages = static_cast<double>(iters) * ctx.comms() * (bidir ? 2 : 1);
      r.time_us = elapsed_us / iters;
      r.gbps = static_cast<double>(size) * messages / (elapsed_us * 1e3);
      r.mmsgs = messages / elapsed_us;
    }
    return {r};
  }

 private:
  // Runs `spec.messages` per comm and direction; returns microseconds from
  // the start signal to the last completion (and acknowledgement) of this
  // rank, over all threads.
  double phase(PatternContext& ctx, const StreamSpec& spec, bool sends, bool recvs) {
    const int threads = ctx.team.size();
    const bool bidir = sends && recvs;
    std::vector<Clock::time_point> ends(static_cast<size_t>(threads));
    Clock::time_point start;
    ctx.team.run([&](int thread) {
      ProgressWatch own(thread == 0 ? &ctx.boot : nullptr, ctx.opts.timeout_s,
                        &ctx.team.abort_flag());
      ProgressWatch& watch = thread == 0 ? ctx.watch : own;
      watch.reset();
      Backend& backend = ctx.backend;
      std::vector<int> comms;
      for (int c = thread; c < ctx.comms(); c += threads) comms.push_back(c);
      std::vector<SendStream> send_streams;
      std::vector<RecvStream> recv_streams;
      std::vector<void*> acks;
      for (int c : comms) {
        MessageBuffers& b = *ctx.buffers[static_cast<size_t>(c)];
        if (sends) send_streams.emplace_back(backend, c, b, spec);
        if (recvs) {
          recv_streams.emplace_back(backend, c, b, spec);
          recv_streams.back().fill();  // pre-post before the sender starts
        }
        if (!bidir && sends) {
          acks.push_back(post_recv_blocking(backend, watch, c, b.recv_ctrl(),
                                            MessageBuffers::kCtrlBytes, kCtrlTag,
                                            b.recv_ctrl_mr()));
        }
      }
      ctx.team.sync();
      if (thread == 0) {
        if (recvs) ctx.boot.send_pod<uint32_t>(MsgKind::ready, 1);
        if (sends) ctx.boot.recv_pod<uint32_t>(MsgKind::ready);
        start = Clock::now();
      }
      ctx.team.sync();

      for (;;) {
        bool any = false;
        bool done = true;
        for (auto& s : send_streams) {
          any |= s.step();
          done &= s.done();
        }
        for (auto& r : recv_streams) {
          any |= r.step();
          done &= r.done();
        }
        if (done) break;
        if (any) {
          watch.progressed();
        } else {
          watch.idle(sends ? "sending" : "receiving");
        }
      }
      if (!bidir && sends) {
        for (size_t i = 0; i < comms.size(); ++i) {
          wait_request(backend, watch, comms[i], acks[i],
                       "waiting for the receiver's acknowledgement");
        }
      } else if (!bidir) {
        for (int c : comms) {
          MessageBuffers& b = *ctx.buffers[static_cast<size_t>(c)];
          void* ack = post_send_blocking(backend, watch, c, b.send_ctrl(),
                                         MessageBuffers::kCtrlBytes, kCtrlTag, b.send_ctrl_mr());
          wait_request(backend, watch, c, ack, "sending the acknowledgement");
        }
      }
      ends[static_cast<size_t>(thread)] = Clock::now();
    });
    Clock::time_point end = *std::max_element(ends.begin(), ends.end());
    return std::chrono::duration<double, std::micro>(end - start).count();
  }

  TestKind kind_;
};

}  // namespace

std::unique_ptr<Pattern> make_stream_pattern(TestKind kind) {
  return std::make_unique<StreamPattern>(kind);
}

}  // namespace weft::perf
