#include "pattern.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>

#include "data_check.h"
#include "errors.h"

namespace weft::perf {
namespace {

std::string mismatch_text(const char* who, const char* test, size_t size, const SlotStatus& s) {
  char buf[256];
  snprintf(buf, sizeof(buf),
           "%s: data mismatch in %s, message size %zu, comm %llu, slot %llu, at offset %llu: "
           "expected 0x%02llx, got 0x%02llx",
           who, test, size, static_cast<unsigned long long>(s.comm),
           static_cast<unsigned long long>(s.slot), static_cast<unsigned long long>(s.offset),
           static_cast<unsigned long long>(s.expected), static_cast<unsigned long long>(s.got));
  return buf;
}

}  // namespace

int timed_iterations(const Options& opts, size_t size) {
  if (opts.iter_bytes == 0) return opts.iters;
  size_t cap = std::max<size_t>(opts.iter_bytes / std::max<size_t>(size, 1), 4);
  return static_cast<int>(std::min<size_t>(static_cast<size_t>(opts.iters), cap));
}

int warmup_iterations(const Options& opts, size_t size) {
  int iters = timed_iterations(opts, size);
  if (iters == opts.iters) return opts.warmup;
  // Capped sizes are large: a few warmup messages are enough.
  return std::min(opts.warmup, std::max(1, iters / 8));
}

void* post_send_blocking(Backend& backend, ProgressWatch& watch, int comm, void* data, size_t size,
                         int tag, void* mr) {
  for (;;) {
    if (void* r = backend.post_send(comm, data, size, tag, mr)) return r;
    watch.idle("posting a send");
  }
}

void* post_recv_blocking(Backend& backend, ProgressWatch& watch, int comm, void* data, size_t size,
                         int tag, void* mr) {
  for (;;) {
    if (void* r = backend.post_recv(comm, 1, &data, &size, &tag, &mr)) return r;
    watch.idle("posting a receive");
  }
}

int wait_request(Backend& backend, ProgressWatch& watch, int comm, void* req, const char* what) {
  int got[kMaxGroup] = {};
  while (!backend.test(comm, req, got)) watch.idle(what);
  watch.progressed();
  return got[0];
}

std::unique_ptr<Pattern> make_pattern(TestKind kind) {
  if (kind == TestKind::latency) return make_latency_pattern();
  if (kind == TestKind::reg) return make_reg_pattern();
  if (is_one_sided_test(kind)) return make_one_sided_pattern(kind);
  return make_stream_pattern(kind);
}

std::vector<size_t> Pattern::sizes(const Options& opts) const {
  return size_sweep(opts.min_bytes, opts.max_bytes, opts.step_factor);
}

int Pattern::planned_iterations(const Options& opts, size_t size) const {
  return timed_iterations(opts, size);
}

void* start_flush(Backend& backend, FlushCounters* counters, int comm, int n, void** data,
                  int* sizes, void** mrs) {
  long long total = 0;
  for (int i = 0; i < n; ++i) total += sizes[i];
  if (total <= 0) return nullptr;
  void* req = backend.flush(comm, n, data, sizes, mrs);
  if (counters != nullptr) {
    counters->issued.fetch_add(1, std::memory_order_relaxed);
    if (req != nullptr) counters->requests.fetch_add(1, std::memory_order_relaxed);
  }
  return req;
}

void flush_blocking(Backend& backend, FlushCounters* counters, ProgressWatch& watch, int comm,
                    int n, void** data, int* sizes, void** mrs) {
  if (void* req = start_flush(backend, counters, comm, n, data, sizes, mrs)) {
    wait_request(backend, watch, comm, req, "flushing a GPU receive");
  }
}

void summarize_latency(std::vector<double>& samples, SizeResult& r) {
  std::sort(samples.begin(), samples.end());
  auto at = [&](double q) {
    size_t i = static_cast<size_t>(q * static_cast<double>(samples.size() - 1) + 0.5);
    return samples[std::min(i, samples.size() - 1)];
  };
  double sum = 0;
  for (double v : samples) sum += v;
  r.has_latency = true;
  r.avg_us = sum / static_cast<double>(samples.size());  // what fi_pingpong reports
  r.min_us = samples.front();
  r.median_us = at(0.5);
  r.p99_us = at(0.99);
  r.time_us = r.median_us;
}

void check_completion_size(const char* test, size_t expected, int got) {
  if (got < 0 || expected != static_cast<size_t>(got)) {
    throw DataMismatch(std::string(test) + ": a receive of " + std::to_string(expected) +
                       " bytes completed with " + std::to_string(got) + " bytes");
  }
}

void verify_and_exchange(PatternContext& ctx, const char* test, size_t size, size_t recv_slots,
                         int comms_used) {
  SlotStatus mine;
  if (ctx.opts.check) {
    int peer = 1 - ctx.rank;
    for (size_t comm = 0; comm < static_cast<size_t>(comms_used) && mine.offset == UINT64_MAX;
         ++comm) {
      for (size_t slot = 0; slot < recv_slots && mine.offset == UINT64_MAX; ++slot) {
        uint64_t key = pattern_key(peer, size, slot);
        uint8_t got = 0;
        size_t off = ctx.buffers[comm]->find_recv_mismatch(size, slot, key, &got);
        if (off != SIZE_MAX) mine = SlotStatus{off, comm, slot, got, expected_byte(key, off)};
      }
    }
  }
  exchange_status(ctx, test, size, mine);
}

void exchange_status(PatternContext& ctx, const char* test, size_t size, const SlotStatus& mine) {
  ctx.boot.send_pod(MsgKind::status, mine);
  auto theirs = ctx.boot.recv_pod<SlotStatus>(MsgKind::status);
  if (mine.offset != UINT64_MAX) {
    throw DataMismatch(mismatch_text(ctx.rank == 0 ? "rank 0" : "rank 1", test, size, mine));
  }
  if (theirs.offset != UINT64_MAX) {
    throw DataMismatch(
        mismatch_text(ctx.rank == 0 ? "rank 1 (peer)" : "rank 0 (peer)", test, size, theirs));
  }
}

}  // namespace weft::perf
