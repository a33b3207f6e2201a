#include "launcher.h"

#include <cstdlib>

#include "errors.h"

namespace weft::perf {
namespace {

struct LauncherVars {
  const char* name;
  const char* rank;
  const char* size;
  const char* local_size;  // ranks on this host
};

// Most specific first: Open MPI and MVAPICH also set PMI_* under some
// configurations, and srun sets SLURM_* under mpirun inside an allocation.
constexpr LauncherVars kLaunchers[] = {
    // scripts/weft-job.sh: ranks in network namespaces of this host.
    {"weft-job", "WEFT_JOB_RANK", "WEFT_JOB_SIZE", nullptr},
    {"mpirun (Open MPI)", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
     "OMPI_COMM_WORLD_LOCAL_SIZE"},
    {"mpirun (MVAPICH)", "MV2_COMM_WORLD_RANK", "MV2_COMM_WORLD_SIZE", "MV2_COMM_WORLD_LOCAL_SIZE"},
    {"mpirun (PMI: MPICH, Intel MPI)", "PMI_RANK", "PMI_SIZE", "MPI_LOCALNRANKS"},
    {"srun", "SLURM_PROCID", "SLURM_NTASKS", nullptr},
};

std::optional<int> env_int(EnvLookup env, const char* name) {
  if (name == nullptr) return std::nullopt;
  const char* v = env(name);
  if (v == nullptr || *v == '\0') return std::nullopt;
  char* end = nullptr;
  long n = strtol(v, &end, 10);
  if (*end != '\0' || n < 0 || n > (1 << 24)) {
    throw UsageError(std::string(name) + "='" + v + "' is not a rank number");
  }
  return static_cast<int>(n);
}

std::string env_string(EnvLookup env, const char* name) {
  const char* v = env(name);
  return v != nullptr ? v : "";
}

}  // namespace

std::string first_slurm_host(const std::string& hostlist) {
  size_t depth = 0;
  size_t end = 0;
  for (; end < hostlist.size(); ++end) {
    char c = hostlist[end];
    if (c == '[') ++depth;
    if (c == ']' && depth > 0) --depth;
    if (c == ',' && depth == 0) break;
  }
  std::string first = hostlist.substr(0, end);
  size_t open = first.find('[');
  if (open == std::string::npos) return first;
  // The first number of the first range, padding kept as written; later
  // brackets ("rack[1-2]-n[3-4]") the same way.
  size_t stop = first.find_first_of(",-]", open + 1);
  size_t close = first.find(']', open + 1);
  if (stop == std::string::npos || close == std::string::npos) return "";
  return first.substr(0, open) + first.substr(open + 1, stop - open - 1) +
         first_slurm_host(first.substr(close + 1));
}

std::optional<LaunchInfo> detect_launcher(EnvLookup env) {
  for (const LauncherVars& l : kLaunchers) {
    std::optional<int> rank = env_int(env, l.rank);
    std::optional<int> size = env_int(env, l.size);
    if (!rank || !size) continue;
    LaunchInfo info{l.name, *rank, *size, ""};
    std::string server = env_string(env, "WEFT_PERF_SERVER");
    std::optional<int> local = env_int(env, l.local_size);
    if (!server.empty()) {
      info.server_host = server;
    } else if (local && *local == *size) {
      info.server_host = "127.0.0.1";  // every rank on this host
    } else if (std::string(l.name) == "srun") {
      // Block distribution (the default) puts task 0 on the first node.
      std::string list = env_string(env, "SLURM_STEP_NODELIST");
      if (list.empty()) list = env_string(env, "SLURM_JOB_NODELIST");
      info.server_host = first_slurm_host(list);
    }
    return info;
  }
  return std::nullopt;
}

}  // namespace weft::perf
