// Rank detection under job launchers (mpirun, srun) without an MPI library:
// their environment variables give this process's rank and the job size,
// and weft-perf maps rank 0 to --server and rank 1 to --client.
#pragma once

#include <optional>
#include <string>

namespace weft::perf {

using EnvLookup = const char* (*)(const char*);

struct LaunchInfo {
  std::string launcher;  // "mpirun (Open MPI)", "srun", ...
  int rank = 0;
  int size = 0;
  // Where rank 1 finds rank 0; empty when the environment does not say.
  std::string server_host;
};

// nullopt when no launcher variables are set.
std::optional<LaunchInfo> detect_launcher(EnvLookup env);

// First host of a Slurm hostlist: "node[07-09,12],gpu1" -> "node07".
std::string first_slurm_host(const std::string& hostlist);

}  // namespace weft::perf
