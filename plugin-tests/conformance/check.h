// Failure reporting inside rank processes (which are not Catch2 runners):
// a failed check throws TestFailure with file:line, the expression and a
// message; the harness carries the text back to the Catch2 process.
// Deadlines bound every wait so a hang becomes a failure (they are a hang
// detector, not a timing assertion).
#pragma once

#include <chrono>
#include <sstream>
#include <stdexcept>
#include <string>

#include "nccl/types.h"

namespace weft::ft {

struct TestFailure : std::runtime_error {
  using std::runtime_error::runtime_error;
};

[[noreturn]] void fail(const char* file, int line, const char* expr, const std::string& msg);
const char* result_name(ncclResult_t r);

// Set by the harness for each rank: "rank 0", "rank 1", "netns server", ...
void set_rank_label(const std::string& label);
const std::string& rank_label();

// Per-rank deadline, WEFT_TEST_TIMEOUT seconds (default 240) from start.
void start_deadline();
bool deadline_passed();
// Fails with "timed out while <what>"; FT_DEADLINE calls it once the
// deadline has passed.
[[noreturn]] void timed_out(const char* file, int line, const std::string& what);
int test_timeout_s();

}  // namespace weft::ft

#define FT_REQUIRE(cond, msg)                                   \
  do {                                                          \
    if (!(cond)) {                                              \
      std::ostringstream w_os_;                                 \
      w_os_ << msg;                                             \
      ::weft::ft::fail(__FILE__, __LINE__, #cond, w_os_.str()); \
    }                                                           \
  } while (0)

#define FT_OK(expr)                                                               \
  do {                                                                            \
    ncclResult_t w_r_ = (expr);                                                   \
    if (w_r_ != ncclSuccess)                                                      \
      ::weft::ft::fail(__FILE__, __LINE__, #expr,                                 \
                       std::string("returned ") + ::weft::ft::result_name(w_r_)); \
  } while (0)

// `what` is built only once the deadline has passed: wait loops call this
// on every poll.
#define FT_DEADLINE(what)                                                                 \
  do {                                                                                    \
    if (::weft::ft::deadline_passed()) ::weft::ft::timed_out(__FILE__, __LINE__, (what)); \
  } while (0)
