#include "ofi/test_aids/completion_reorder.h"

namespace weft::ofi {

void CompletionReorder::configure(size_t window, uint64_t seed, size_t batch) {
  window_ = window;
  state_ = seed | 1;
  held_.reserve(window + batch);
}

fi_cq_tagged_entry CompletionReorder::take_any() {
  state_ ^= state_ << 13;
  state_ ^= state_ >> 7;
  state_ ^= state_ << 17;
  size_t pick = static_cast<size_t>(state_ % held_.size());
  fi_cq_tagged_entry entry = held_[pick];
  held_[pick] = held_.back();
  held_.pop_back();
  return entry;
}

}  // namespace weft::ofi
