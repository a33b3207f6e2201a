// Completion queues and the channels that announce them.

#include "completion.h"

#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <vector>

#include "context.h"
#include "counters.h"

namespace softverbs {

Channel::~Channel() {
  if (handle.verbs.fd >= 0) close(handle.verbs.fd);
}

void Channel::notify(Cq* cq) {
  std::lock_guard<std::mutex> lock(mu);
  events.push_back(cq);
  uint64_t one = 1;
  ssize_t w = write(handle.verbs.fd, &one, sizeof(one));
  (void)w;
}

void Cq::push(const Cqe& entry) {
  std::lock_guard<std::mutex> lock(mu);
  if (static_cast<int>(entries.size()) >= depth && !overflowed) {
    overflowed = true;
    ibv_async_event event{};
    event.event_type = IBV_EVENT_CQ_ERR;
    event.element.cq = verbs();
    context->queue_event(event);
  }
  entries.push_back(entry);
  if (armed && channel != nullptr) {
    armed = false;
    channel->notify(this);
  }
}

void Cq::purge(const Qp* qp) {
  std::lock_guard<std::mutex> lock(mu);
  std::erase_if(entries, [qp](const Cqe& e) { return e.qp == qp; });
}

int Cq::poll(int max, ibv_wc* out) {
  Cqe entries_out[16];
  int n = 0;
  while (n < max) {
    int want = std::min(max - n, 16);
    int got = poll(want, entries_out);
    for (int i = 0; i < got; ++i) out[n + i] = entries_out[i].wc;
    n += got;
    if (got < want) break;
  }
  return n;
}

int Cq::poll(int max, Cqe* out) {
  std::lock_guard<std::mutex> lock(mu);
  int n = 0;
  while (n < max && !entries.empty()) {
    size_t pick = 0;
    if (reorder_window > 1) {
      // Among the first entries, any that has no older entry of its QP
      // (SRD entries: any).
      size_t window = std::min<size_t>(static_cast<size_t>(reorder_window), entries.size());
      std::vector<size_t> candidates;
      for (size_t i = 0; i < window; ++i) {
        bool first = true;
        if (!entries[i].unordered) {
          for (size_t j = 0; j < i && first; ++j) first = entries[j].qp != entries[i].qp;
        }
        if (first) candidates.push_back(i);
      }
      pick = candidates[rng() % candidates.size()];
    }
    const Cqe& e = entries[pick];
    out[n] = e;
    if (e.wc.status != IBV_WC_SUCCESS) count(kErrorCompletions);
    if (e.retired != nullptr && e.unordered) {
      e.retired->fetch_add(1, std::memory_order_acq_rel);
    } else if (e.retired != nullptr) {
      // A polled completion frees its WR's slot and every slot before it.
      std::atomic<uint64_t>& retired = *e.retired;
      if (retired.load(std::memory_order_relaxed) < e.index + 1) {
        retired.store(e.index + 1, std::memory_order_release);
      }
    }
    entries.erase(entries.begin() + static_cast<std::ptrdiff_t>(pick));
    ++n;
  }
  if (entries.size() < static_cast<size_t>(depth)) overflowed = false;
  count(kCompletions, static_cast<uint64_t>(n));
  return n;
}

}  // namespace softverbs
