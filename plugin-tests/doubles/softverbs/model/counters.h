// The per-process counters behind struct softverbs_counters.
#pragma once

#include <cstdint>
#include <string>

#include "softverbs.h"

namespace softverbs {

// In the order of struct softverbs_counters.
enum Counter : int {
  kDoorbells,
  kSendWrs,
  kSendWrsSend,
  kSendWrsSendImm,
  kSendWrsWrite,
  kSendWrsWriteImm,
  kSendWrsRead,
  kInlineWrs,
  kSignaledWrs,
  kRecvPosts,
  kRecvWrs,
  kPollCalls,
  kCompletions,
  kErrorCompletions,
  kBytesWritten,
  kBytesRead,
  kBytesSent,
  kPacketsSent,
  kPacketsReceived,
  kRnrNaksSent,
  kRnrNaksReceived,
  kRetransmits,
  kEceSet,
  kCounterCount,
};
void count(Counter counter, uint64_t n = 1);
void read_counters(softverbs_counters* out);
void reset_counters();
// One JSON object (no newline) with the pid and every counter.
std::string counters_json();
// Appends counters_json() as a line to SOFTVERBS_COUNTERS_FILE, when set.
void write_counters_file();

}  // namespace softverbs
