// Error types of weft-perf. Everything below main() reports failures by
// throwing; main() prints the message and picks the exit status.
#pragma once

#include <stdexcept>
#include <string>

namespace weft::perf {

// Bad command line: exit status 2.
struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Any run-time failure (plugin, provider, bootstrap, peer): exit status 1.
struct PerfError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// The peer reported an error or went away; its own message was printed there.
struct PeerError : PerfError {
  using PerfError::PerfError;
};

// Received bytes differ from what the sender wrote.
struct DataMismatch : PerfError {
  using PerfError::PerfError;
};

}  // namespace weft::perf
