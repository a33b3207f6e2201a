// The secret of one listen comm (docs/security.md): 64 bits from the
// kernel's random source, new for each listen, carried in its handle and
// nowhere else. Whoever connects presents it in its first message; the
// listener turns nothing that cannot present it into a comm, so knowing a
// listener's address and weft's wire format is not enough to join a job.
#pragma once

#include <cstdint>
#include <string>

namespace weft {

// A fresh secret (never 0). False when the kernel has no random source to
// give: a listen then fails rather than hand out a guessable secret.
bool fresh_listen_secret(uint64_t* out);

// Whether `presented` is `expected`, in a time that does not depend on
// which bits differ.
bool listen_secret_matches(uint64_t expected, uint64_t presented);

// A connect refused (by default for a wrong secret; `why` otherwise),
// logged as a WARN naming `where` (the listener) and `from` (where it came
// from): at most one a second per process, so a scan cannot flood the log;
// the next one logged says how many were refused meanwhile.
void log_refused_connect(const std::string& where, const std::string& from,
                         const std::string& why = {});

}  // namespace weft
