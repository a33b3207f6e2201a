// One rank's view of a one-sided comm under test: the table, its context,
// the comm over every rank of the team, and helpers that wait for
// requests and signals while driving progress, as NCCL's proxy thread does.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "rank_team.h"
#include "weft_client/rma_client.h"

namespace weft::rt {

// The table the suite drives: WEFT_TEST_RMA_TABLE (rma14 when unset).
std::string table_under_test();
// The plugin's log on stderr with WEFT_TEST_RMA_LOG=1 (warnings) or 2 (all).
void log_sink(ncclDebugLogLevel level, unsigned long, const char*, int, const char* format, ...);
// WEFT_TEST_RMA_MAX: the largest transfer (64 MiB when unset).
size_t largest_transfer();

// Byte i of what `sender` writes for `target` with `salt`.
inline uint8_t pattern_byte(int sender, int target, size_t i, uint32_t salt) {
  return static_cast<uint8_t>(sender * 67 + target * 29 + i * 13 + (i >> 9) + salt);
}
void fill_pattern(uint8_t* out, size_t size, int sender, int target, uint32_t salt);
// Empty when it matches, else where it first differs.
std::string check_pattern(const uint8_t* in, size_t size, int sender, int target, uint32_t salt);

inline uint64_t load_signal(const void* word) {
  return __atomic_load_n(static_cast<const uint64_t*>(word), __ATOMIC_ACQUIRE);
}

class Session {
 public:
  explicit Session(Team& team) : team_(team) {}
  ~Session();
  // Loads the table, inits, listens on device 0, swaps handles, connects
  // (calling `before_connect` just before).
  std::string open(const std::function<void()>& before_connect = {});
  std::string close();

  const RmaClient& table() const { return table_; }
  RmaClient& mutable_table() { return table_; }  // to set optFlags (v15+)
  void* comm() const { return comm_; }
  Team& team() { return team_; }
  // The comm itself (v11/v12) or a block made with `contexts`.
  std::string make_target(int contexts, RmaTarget* target);
  // `type`: NCCL_PTR_HOST or NCCL_PTR_CUDA.
  std::string register_region(void* data, size_t size, void** mhandle, int type = NCCL_PTR_HOST);
  // getProperties' ptrSupport of device 0.
  int ptr_support() const { return ptr_support_; }
  // The team's barrier, driving `target`'s progress while it waits.
  std::string barrier(const RmaTarget& target, int timeout_s = 120);
  // Waits for the request while driving `target`'s progress.
  std::string wait(const RmaTarget& target, void* request, const char* what, int timeout_s = 120);
  // Waits until the 64-bit word at `word` reaches `value`.
  std::string wait_signal(const RmaTarget& target, const void* word, uint64_t value,
                          const char* what, int timeout_s = 120);

 private:
  Team& team_;
  RmaClient table_;
  void* context_ = nullptr;
  void* listen_ = nullptr;
  void* comm_ = nullptr;
  int ptr_support_ = 0;
};

// "what: result N" for a call that did not return ncclSuccess.
std::string failed_call(const char* what, ncclResult_t result);

}  // namespace weft::rt
