// weft-perf --job: N ranks, each with the comms of a job pattern
// (job_graph.h), set up the way NCCL's transport setup does it (every listen
// first, the handles exchanged, then every connect and accept polled in one
// loop, each listen closed after its accept), then checked bytes on every
// comm and a bandwidth round. Rank 0 reports setup time, connects per
// second, memory and fds per comm at their high-water marks, and the
// bandwidth per rank. Ranks: forked on this host (--local --ranks N), or one
// process each under a launcher (mpirun, srun, scripts/weft-job.sh).
#pragma once

#include "options.h"

namespace weft::perf {

// The process exit status: 0 when every rank finished every pattern.
int run_job(const Options& opts);

}  // namespace weft::perf
