#include "pattern.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>

#include "data_check.h"
#include "errors.h"

namespace weft::perf {
namespace {

// Sent after each size step; all-ones offset means "no mismatch".
struct SlotStatus {
  uint64_t offset;
  uint64_t slot;
  uint64_t got;
  uint64_t expected;
};

std::string mismatch_text(const char* who, const char* test, size_t size, const SlotStatus& s) {
  char buf[256];
  snprintf(buf, sizeof(buf),
           "%s: data mismatch in %s, message size %zu, slot %llu, at offset %llu: expected "
           "0x%02llx, got 0x%02llx",
           who, test, size, static_cast<unsigned long long>(s.slot),
           static_cast<unsigned long long>(s.offset), static_cast<unsigned long long>(s.expected),
           static_cast<unsigned long long>(s.got));
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

void* post_send_blocking(PatternContext& ctx, void* data, size_t size, void* mr) {
  for (;;) {
    if (void* r = ctx.transport.post_send(data, size, mr)) return r;
    ctx.watch.idle("posting a send");
  }
}

void* post_recv_blocking(PatternContext& ctx, void* data, size_t size, void* mr) {
  for (;;) {
    if (void* r = ctx.transport.post_recv(data, size, mr)) return r;
    ctx.watch.idle("posting a receive");
  }
}

size_t wait_request(PatternContext& ctx, void* req, const char* what) {
  size_t got = 0;
  while (!ctx.transport.test(req, &got)) ctx.watch.idle(what);
  ctx.watch.progressed();
  return got;
}

void check_completion_size(const char* test, size_t expected, size_t got) {
  if (expected != got) {
    throw DataMismatch(std::string(test) + ": a receive of " + std::to_string(expected) +
                       " bytes completed with " + std::to_string(got) + " bytes");
  }
}

void verify_and_exchange(PatternContext& ctx, const char* test, size_t size, size_t recv_slots) {
  SlotStatus mine{UINT64_MAX, 0, 0, 0};
  if (ctx.opts.check) {
    int peer = 1 - ctx.rank;
    for (size_t slot = 0; slot < recv_slots && mine.offset == UINT64_MAX; ++slot) {
      const char* buf = ctx.buffers.recv_slot(size, slot);
      uint64_t key = pattern_key(peer, size, slot);
      size_t off = find_mismatch(buf, size, key);
      if (off != SIZE_MAX) {
        mine = SlotStatus{off, slot, static_cast<unsigned char>(buf[off]), expected_byte(key, off)};
      }
    }
  }
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
