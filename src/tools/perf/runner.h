// One rank of a weft-perf run, once the bootstrap connection exists:
// agree on parameters, build the backend, run every pattern over the size
// sweep, report (rank 0). Returns the process exit status.
#pragma once

#include "bootstrap.h"
#include "options.h"

namespace weft::perf {

// print_errors false: leave the error to the peer, which prints what we
// send it (--local: one message per failure, not two).
int run_rank(int rank, Bootstrap& boot, Options opts, bool print_errors = true);

}  // namespace weft::perf
