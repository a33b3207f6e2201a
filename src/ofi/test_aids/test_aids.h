// The libfabric transport's test aids together (WEFT_OFI_TEST_REORDER,
// WEFT_OFI_TEST_HOLD_INJECTS, WEFT_OFI_TEST_HOSTILE), reached through one
// pointer that is null unless a test turned one on: on the data path a job
// pays one pointer test where an aid could act, never a flag per aid.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "ofi/test_aids/completion_reorder.h"
#include "ofi/test_aids/held_injects.h"
#include "ofi/test_aids/wire_mutation.h"

namespace weft::ofi {

// What the parameters ask of the aids (all off by default).
struct TestAidSettings {
  // Hold up to this many completions and deliver them in a shuffled order
  // (0: in the provider's order).
  int reorder_window = 0;
  uint64_t reorder_seed = 1;
  // Hold injects as tcp's send queue may (held_injects.h).
  bool hold_injects = false;
  // Play a hostile peer (wire_mutation.h).
  WireMutation wire_mutation = WireMutation::kNone;

  bool any() const {
    return reorder_window > 0 || hold_injects || wire_mutation != WireMutation::kNone;
  }
};

struct TestAids {
  CompletionReorder reorder;
  HeldInjects held_injects;
  WireMutation wire_mutation = WireMutation::kNone;

  // Null when `settings` turn nothing on. `batch`: the most completions one
  // read returns (the reordering window holds them).
  static std::unique_ptr<TestAids> make(const TestAidSettings& settings, size_t batch) {
    if (!settings.any()) return nullptr;
    auto aids = std::make_unique<TestAids>();
    aids->reorder.configure(
        static_cast<size_t>(settings.reorder_window > 0 ? settings.reorder_window : 0),
        settings.reorder_seed, batch);
    aids->held_injects.configure(settings.hold_injects);
    aids->wire_mutation = settings.wire_mutation;
    return aids;
  }
};

// The hostile-peer mutation in force (kNone without aids).
inline WireMutation wire_mutation_of(const TestAids* aids) {
  return aids != nullptr ? aids->wire_mutation : WireMutation::kNone;
}

}  // namespace weft::ofi
