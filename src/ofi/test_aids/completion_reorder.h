// Test aid (WEFT_OFI_TEST_REORDER): completions held back in a small window
// and handed on in a shuffled order, so ordered providers (tcp, shm) show
// what EFA's unordered completions would do to the protocols.
#pragma once

#include <rdma/fi_eq.h>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace weft::ofi {

class CompletionReorder {
 public:
  // `window` 0: off. `batch`: the most entries one read adds.
  void configure(size_t window, uint64_t seed, size_t batch);
  bool active() const { return window_ > 0; }

  // Holds `count` fresh entries and passes on those beyond the window, or,
  // when the queue ran dry (count 0), one held entry, each to `deliver`.
  template <typename Deliver>
  void pass(const fi_cq_tagged_entry* entries, size_t count, Deliver&& deliver) {
    held_.insert(held_.end(), entries, entries + count);
    size_t keep = count > 0 ? window_ : (held_.empty() ? 0 : held_.size() - 1);
    while (held_.size() > keep) deliver(take_any());
  }

 private:
  // Removes and returns a held entry picked at random.
  fi_cq_tagged_entry take_any();

  size_t window_ = 0;
  uint64_t state_ = 1;  // xorshift64
  std::vector<fi_cq_tagged_entry> held_;
};

}  // namespace weft::ofi
