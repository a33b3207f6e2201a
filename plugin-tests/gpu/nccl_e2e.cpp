// Stock NCCL end to end: one process per rank, all on one CUDA device,
// running all_reduce (sum, float) and sendrecv (ring) over a size sweep,
// timing them like nccl-tests and checking every result on the host.
// scripts/gpu-e2e.sh runs it with a different NCCL_HOSTID per process, so
// NCCL treats the ranks as two hosts and all traffic crosses the net plugin.
//
// usage: weft-nccl-e2e <rank> <nranks> <id-file> [--min-bytes N] [--max-bytes N] [--device D]
// Rank 0 writes the ncclUniqueId to <id-file>; the others wait for it.
// Exit status: 0 all results correct, 1 a mismatch or an error, 2 bad usage.
#include <cuda_runtime.h>
#include <nccl.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace {

#define CUDA_CHECK(call)                                                  \
  do {                                                                    \
    cudaError_t e_ = (call);                                              \
    if (e_ != cudaSuccess) fail(__LINE__, #call, cudaGetErrorString(e_)); \
  } while (0)
#define NCCL_CHECK(call)                                                  \
  do {                                                                    \
    ncclResult_t r_ = (call);                                             \
    if (r_ != ncclSuccess) fail(__LINE__, #call, ncclGetErrorString(r_)); \
  } while (0)

int g_rank = -1;

[[noreturn]] void fail(int line, const char* what, const char* why) {
  std::fprintf(stderr, "rank %d: %s failed (line %d): %s\n", g_rank, what, line, why);
  std::exit(1);
}

struct Options {
  int rank = 0;
  int nranks = 2;
  std::string id_file;
  size_t min_bytes = 8;
  size_t max_bytes = size_t{256} << 20;
  int device = 0;
};

[[noreturn]] void usage(const char* error) {
  std::fprintf(stderr,
               "error: %s\nusage: weft-nccl-e2e <rank> <nranks> <id-file> [--min-bytes N] "
               "[--max-bytes N] [--device D]\n",
               error);
  std::exit(2);
}

size_t parse_bytes(const char* text) {
  char* end = nullptr;
  unsigned long long value = std::strtoull(text, &end, 10);
  switch (*end) {
    case 'K':
      value <<= 10, ++end;
      break;
    case 'M':
      value <<= 20, ++end;
      break;
    case 'G':
      value <<= 30, ++end;
      break;
    default:
      break;
  }
  if (end == text || *end != '\0') usage("bad byte count");
  return static_cast<size_t>(value);
}

Options parse_options(int argc, char** argv) {
  if (argc < 4) usage("need <rank> <nranks> <id-file>");
  Options o;
  o.rank = std::atoi(argv[1]);
  o.nranks = std::atoi(argv[2]);
  o.id_file = argv[3];
  for (int i = 4; i < argc; ++i) {
    const std::string arg = argv[i];
    if (i + 1 >= argc) usage("option without a value");
    if (arg == "--min-bytes") {
      o.min_bytes = parse_bytes(argv[++i]);
    } else if (arg == "--max-bytes") {
      o.max_bytes = parse_bytes(argv[++i]);
    } else if (arg == "--device") {
      o.device = std::atoi(argv[++i]);
    } else {
      usage("unknown option");
    }
  }
  if (o.nranks < 2 || o.rank < 0 || o.rank >= o.nranks)
    usage("need 0 <= rank < nranks, nranks >= 2");
  if (o.min_bytes < 8 || o.min_bytes > o.max_bytes) usage("need 8 <= min-bytes <= max-bytes");
  return o;
}

// Rank 0 publishes the id atomically (write + rename); the others poll.
ncclUniqueId exchange_id(const Options& o) {
  ncclUniqueId id;
  if (o.rank == 0) {
    NCCL_CHECK(ncclGetUniqueId(&id));
    const std::string tmp = o.id_file + ".tmp." + std::to_string(getpid());
    FILE* f = std::fopen(tmp.c_str(), "wb");
    if (f == nullptr || std::fwrite(&id, sizeof(id), 1, f) != 1 || std::fclose(f) != 0)
      fail(__LINE__, "writing the id file", tmp.c_str());
    if (std::rename(tmp.c_str(), o.id_file.c_str()) != 0)
      fail(__LINE__, "rename", o.id_file.c_str());
    return id;
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (std::chrono::steady_clock::now() < deadline) {
    if (FILE* f = std::fopen(o.id_file.c_str(), "rb")) {
      const size_t n = std::fread(&id, sizeof(id), 1, f);
      std::fclose(f);
      if (n == 1) return id;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  fail(__LINE__, "waiting for the id file", o.id_file.c_str());
}

float reduce_input(int rank, size_t i) {
  return static_cast<float>(rank + 1 + i % 13);
}
uint8_t send_pattern(int rank, size_t i) {
  return static_cast<uint8_t>(i * 131 + rank * 17 + 1);
}

struct Result {
  double time_us = 0;
  size_t errors = 0;
};

// Enough iterations to time small sizes, few for large ones.
int iterations(size_t bytes) {
  const size_t n = (size_t{1} << 30) / bytes;
  return static_cast<int>(n < 5 ? 5 : (n > 50 ? 50 : n));
}

template <typename Launch>
double time_op(size_t bytes, cudaStream_t stream, Launch launch) {
  constexpr int kWarmup = 3;
  for (int i = 0; i < kWarmup; ++i) launch();
  cudaEvent_t start, stop;
  CUDA_CHECK(cudaEventCreate(&start));
  CUDA_CHECK(cudaEventCreate(&stop));
  const int iters = iterations(bytes);
  CUDA_CHECK(cudaEventRecord(start, stream));
  for (int i = 0; i < iters; ++i) launch();
  CUDA_CHECK(cudaEventRecord(stop, stream));
  CUDA_CHECK(cudaEventSynchronize(stop));
  float ms = 0;
  CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
  CUDA_CHECK(cudaEventDestroy(start));
  CUDA_CHECK(cudaEventDestroy(stop));
  return ms * 1000.0 / iters;
}

Result run_all_reduce(const Options& o, ncclComm_t comm, cudaStream_t stream, size_t bytes,
                      void* send, void* recv) {
  const size_t count = bytes / sizeof(float);
  std::vector<float> host(count);
  for (size_t i = 0; i < count; ++i) host[i] = reduce_input(o.rank, i);
  CUDA_CHECK(cudaMemcpy(send, host.data(), count * sizeof(float), cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemset(recv, 0xff, count * sizeof(float)));  // NaN: a skipped write shows

  Result r;
  r.time_us = time_op(bytes, stream, [&] {
    NCCL_CHECK(ncclAllReduce(send, recv, count, ncclFloat, ncclSum, comm, stream));
  });
  CUDA_CHECK(cudaMemcpy(host.data(), recv, count * sizeof(float), cudaMemcpyDeviceToHost));
  const int n = o.nranks;
  for (size_t i = 0; i < count; ++i) {
    const float expected = static_cast<float>(n * (n + 1) / 2 + n * (i % 13));
    if (host[i] != expected && r.errors++ == 0)
      std::fprintf(stderr, "rank %d: all_reduce %zu B: element %zu is %g, expected %g\n", o.rank,
                   bytes, i, host[i], expected);
  }
  return r;
}

// Ring: send to rank+1, receive from rank-1.
Result run_sendrecv(const Options& o, ncclComm_t comm, cudaStream_t stream, size_t bytes,
                    void* send, void* recv) {
  std::vector<uint8_t> host(bytes);
  for (size_t i = 0; i < bytes; ++i) host[i] = send_pattern(o.rank, i);
  CUDA_CHECK(cudaMemcpy(send, host.data(), bytes, cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemset(recv, 0, bytes));
  const int next = (o.rank + 1) % o.nranks;
  const int prev = (o.rank + o.nranks - 1) % o.nranks;

  Result r;
  r.time_us = time_op(bytes, stream, [&] {
    NCCL_CHECK(ncclGroupStart());
    NCCL_CHECK(ncclSend(send, bytes, ncclUint8, next, comm, stream));
    NCCL_CHECK(ncclRecv(recv, bytes, ncclUint8, prev, comm, stream));
    NCCL_CHECK(ncclGroupEnd());
  });
  CUDA_CHECK(cudaMemcpy(host.data(), recv, bytes, cudaMemcpyDeviceToHost));
  for (size_t i = 0; i < bytes; ++i) {
    if (host[i] != send_pattern(prev, i) && r.errors++ == 0)
      std::fprintf(stderr, "rank %d: sendrecv %zu B: byte %zu is %u, expected %u\n", o.rank, bytes,
                   i, host[i], send_pattern(prev, i));
  }
  return r;
}

// 8 B, 32 B, ... (factor 4), and max_bytes itself when the sweep skips it.
std::vector<size_t> size_sweep(const Options& o) {
  std::vector<size_t> sizes;
  for (size_t s = o.min_bytes; s <= o.max_bytes; s *= 4) sizes.push_back(s);
  if (sizes.back() != o.max_bytes) sizes.push_back(o.max_bytes);
  return sizes;
}

}  // namespace

int main(int argc, char** argv) {
  setvbuf(stdout, nullptr, _IOLBF, 0);
  const Options o = parse_options(argc, argv);
  g_rank = o.rank;

  CUDA_CHECK(cudaSetDevice(o.device));
  cudaDeviceProp prop;
  CUDA_CHECK(cudaGetDeviceProperties(&prop, o.device));
  int nccl_version = 0;
  NCCL_CHECK(ncclGetVersion(&nccl_version));

  const ncclUniqueId id = exchange_id(o);
  ncclComm_t comm;
  NCCL_CHECK(ncclCommInitRank(&comm, o.nranks, id, o.rank));
  cudaStream_t stream;
  CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  void* send = nullptr;
  void* recv = nullptr;
  CUDA_CHECK(cudaMalloc(&send, o.max_bytes));
  CUDA_CHECK(cudaMalloc(&recv, o.max_bytes));

  const bool print = o.rank == 0;
  if (print) {
    std::printf("# weft-nccl-e2e: %d ranks, NCCL %d, device %d (%s), NCCL_NET=%s\n", o.nranks,
                nccl_version, o.device, prop.name,
                std::getenv("NCCL_NET") ? std::getenv("NCCL_NET") : "(unset)");
    std::printf("# busbw factor: all_reduce 2(n-1)/n, sendrecv 1; GB/s = 1e9 bytes/s\n");
    std::printf("%-10s %12s %7s %11s %11s %11s %8s\n", "op", "bytes", "iters", "time_us",
                "algbw_GB/s", "busbw_GB/s", "check");
  }
  size_t total_errors = 0;
  const double ar_factor = 2.0 * (o.nranks - 1) / o.nranks;
  for (size_t bytes : size_sweep(o)) {
    struct Row {
      const char* op;
      Result r;
      double factor;
    };
    const Row rows[] = {
        {"all_reduce", run_all_reduce(o, comm, stream, bytes, send, recv), ar_factor},
        {"sendrecv", run_sendrecv(o, comm, stream, bytes, send, recv), 1.0},
    };
    for (const Row& row : rows) {
      total_errors += row.r.errors;
      const double algbw = bytes / row.r.time_us / 1e3;
      if (print)
        std::printf("%-10s %12zu %7d %11.1f %11.3f %11.3f %8s\n", row.op, bytes, iterations(bytes),
                    row.r.time_us, algbw, algbw * row.factor, row.r.errors ? "WRONG" : "ok");
    }
  }

  CUDA_CHECK(cudaFree(send));
  CUDA_CHECK(cudaFree(recv));
  NCCL_CHECK(ncclCommFinalize(comm));
  NCCL_CHECK(ncclCommDestroy(comm));
  CUDA_CHECK(cudaStreamDestroy(stream));
  std::printf("rank %d: %s (%zu wrong elements)\n", o.rank, total_errors ? "FAIL" : "PASS",
              total_errors);
  return total_errors ? 1 : 0;
}
