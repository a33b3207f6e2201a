// Stock NCCL end to end: one process per rank, all on one CUDA device,
// running all_reduce (sum, float), all_gather, reduce_scatter (sum, float),
// broadcast (root 0), alltoall (grouped ncclSend/ncclRecv to every rank)
// and sendrecv (ring) over a size sweep, timing them like nccl-tests and
// checking every element of every result on the host.
// scripts/gpu-e2e.sh runs it with a different NCCL_HOSTID per process, so
// NCCL treats the ranks as separate hosts and all traffic crosses the net plugin.
//
// usage: weft-nccl-e2e <rank> <nranks> <id-file> [--min-bytes N] [--max-bytes N]
//                      [--iter-bytes N] [--ops LIST] [--device D]
//        weft-nccl-e2e --probe [--device D]
// Rank 0 writes the ncclUniqueId to <id-file>; the others wait for it.
// --probe prints what CUDA and NCCL report about this machine and exits.
// Sizes (the "bytes" column) as in nccl-tests: all_gather the whole output
// (each rank contributes bytes/n), reduce_scatter the whole input (each rank
// gets bytes/n), alltoall what each rank sends in all (bytes/n per peer).
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

enum Op { kAllReduce, kAllGather, kReduceScatter, kBroadcast, kAllToAll, kSendRecv, kNumOps };
const char* const kOpNames[kNumOps] = {"all_reduce", "all_gather", "reduce_scatter",
                                       "broadcast",  "alltoall",   "sendrecv"};

// NCCL's (nccl-tests') bus bandwidth factors.
double busbw_factor(Op op, int n) {
  switch (op) {
    case kAllReduce:
      return 2.0 * (n - 1) / n;
    case kAllGather:
    case kReduceScatter:
    case kAllToAll:
      return static_cast<double>(n - 1) / n;
    default:
      return 1.0;  // broadcast, sendrecv
  }
}

struct Options {
  bool probe = false;
  int rank = 0;
  int nranks = 2;
  std::string id_file;
  size_t min_bytes = 8;
  size_t max_bytes = size_t{256} << 20;
  size_t iter_bytes = size_t{1} << 30;
  bool ops[kNumOps] = {true, true, true, true, true, true};
  int device = 0;
};

[[noreturn]] void usage(const char* error) {
  std::fprintf(stderr,
               "error: %s\nusage: weft-nccl-e2e <rank> <nranks> <id-file> [--min-bytes N] "
               "[--max-bytes N] [--iter-bytes N] [--ops LIST] [--device D]\n"
               "       weft-nccl-e2e --probe [--device D]\n"
               "ops: all_reduce,all_gather,reduce_scatter,broadcast,alltoall,sendrecv "
               "(default: all)\n",
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

void parse_ops(const std::string& list, bool* ops) {
  for (int i = 0; i < kNumOps; ++i) ops[i] = false;
  size_t start = 0;
  while (start <= list.size()) {
    size_t comma = list.find(',', start);
    if (comma == std::string::npos) comma = list.size();
    const std::string name = list.substr(start, comma - start);
    bool known = false;
    for (int i = 0; i < kNumOps; ++i) {
      if (name == kOpNames[i] || name == "all") ops[i] = known = true;
    }
    if (!known) usage("unknown op in --ops");
    start = comma + 1;
  }
}

Options parse_options(int argc, char** argv) {
  Options o;
  int i = 1;
  if (argc >= 2 && std::strcmp(argv[1], "--probe") == 0) {
    o.probe = true;
    i = 2;
  } else {
    if (argc < 4) usage("need <rank> <nranks> <id-file>");
    o.rank = std::atoi(argv[1]);
    o.nranks = std::atoi(argv[2]);
    o.id_file = argv[3];
    i = 4;
  }
  for (; i < argc; ++i) {
    const std::string arg = argv[i];
    if (i + 1 >= argc) usage("option without a value");
    if (arg == "--device") {
      o.device = std::atoi(argv[++i]);
    } else if (o.probe) {
      usage("--probe takes only --device");
    } else if (arg == "--min-bytes") {
      o.min_bytes = parse_bytes(argv[++i]);
    } else if (arg == "--max-bytes") {
      o.max_bytes = parse_bytes(argv[++i]);
    } else if (arg == "--iter-bytes") {
      o.iter_bytes = parse_bytes(argv[++i]);
    } else if (arg == "--ops") {
      parse_ops(argv[++i], o.ops);
    } else {
      usage("unknown option");
    }
  }
  if (o.probe) return o;
  if (o.nranks < 2 || o.nranks > 4096 || o.rank < 0 || o.rank >= o.nranks)
    usage("need 0 <= rank < nranks, 2 <= nranks <= 4096");
  if (o.min_bytes < 8 || o.min_bytes > o.max_bytes) usage("need 8 <= min-bytes <= max-bytes");
  if (o.iter_bytes == 0) usage("need iter-bytes > 0");
  return o;
}

// What the machine offers, for the logs: no NCCL communicator needed.
int probe(const Options& o) {
  int runtime = 0, driver = 0, nccl = 0, count = 0;
  CUDA_CHECK(cudaRuntimeGetVersion(&runtime));
  cudaError_t e = cudaDriverGetVersion(&driver);
  std::printf("probe: CUDA runtime %d, driver API %d%s\n", runtime, driver,
              e == cudaSuccess ? "" : " (cudaDriverGetVersion failed)");
  NCCL_CHECK(ncclGetVersion(&nccl));
  std::printf("probe: NCCL %d\n", nccl);
  e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess || count == 0) {
    std::fprintf(stderr, "probe: no usable CUDA device: %s\n",
                 e != cudaSuccess ? cudaGetErrorString(e) : "cudaGetDeviceCount returned 0");
    return 1;
  }
  if (o.device >= count) {
    std::fprintf(stderr, "probe: device %d does not exist (%d devices)\n", o.device, count);
    return 1;
  }
  cudaDeviceProp prop;
  CUDA_CHECK(cudaGetDeviceProperties(&prop, o.device));
  char bus_id[32] = {};
  CUDA_CHECK(cudaDeviceGetPCIBusId(bus_id, sizeof(bus_id), o.device));
  int gdr = 0, flush = 0, ordering = 0;
  CUDA_CHECK(cudaDeviceGetAttribute(&gdr, cudaDevAttrGPUDirectRDMASupported, o.device));
  CUDA_CHECK(cudaDeviceGetAttribute(&flush, cudaDevAttrGPUDirectRDMAFlushWritesOptions, o.device));
  CUDA_CHECK(cudaDeviceGetAttribute(&ordering, cudaDevAttrGPUDirectRDMAWritesOrdering, o.device));
  std::printf("probe: %d device(s); device %d: %s, sm_%d%d, %.1f GiB, PCI %s\n", count, o.device,
              prop.name, prop.major, prop.minor, prop.totalGlobalMem / double(1 << 30), bus_id);
  std::printf("probe: GPUDirect RDMA supported %d, flush options %d, writes ordering %d\n", gdr,
              flush, ordering);
  // A real allocation: a driver that lists the GPU but cannot use it fails here.
  void* p = nullptr;
  CUDA_CHECK(cudaSetDevice(o.device));
  CUDA_CHECK(cudaMalloc(&p, 1 << 20));
  CUDA_CHECK(cudaMemset(p, 0, 1 << 20));
  CUDA_CHECK(cudaDeviceSynchronize());
  CUDA_CHECK(cudaFree(p));
  std::printf("probe: OK\n");
  return 0;
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

// Reduction inputs: small integers, so float sums are exact; the period 13
// is prime to every power of two, so a block landing at a wrong offset shows.
float reduce_input(int rank, size_t i) {
  return static_cast<float>(rank + 1 + i % 13);
}
float reduce_sum(int nranks, size_t i) {
  return static_cast<float>(nranks * (nranks + 1) / 2 + nranks * (i % 13));
}

// Byte patterns: the top byte of a multiplicative hash of (key, index), so
// every bit of both matters. A shifted, stale or swapped block shows, and
// the key names op, source and destination.
uint32_t key_of(Op op, int src, int dst) {
  return (static_cast<uint32_t>(op) << 24) | (static_cast<uint32_t>(src) << 12) |
         static_cast<uint32_t>(dst);
}
uint8_t pattern(uint32_t key, size_t i) {
  const uint64_t x = (static_cast<uint64_t>(key) << 40) ^ static_cast<uint64_t>(i);
  return static_cast<uint8_t>((x * 0x9E3779B97F4A7C15ull) >> 56);
}
void fill(uint8_t* out, size_t n, uint32_t key) {
  for (size_t i = 0; i < n; ++i) out[i] = pattern(key, i);
}

struct Result {
  bool ran = false;
  size_t bytes = 0;  // the size reported (whole multiples of the element and rank count)
  int iters = 0;
  double time_us = 0;
  size_t errors = 0;
};

// Counts the bytes of got[0..n) that differ from pattern(key, ·) and names the first.
size_t check_bytes(const Options& o, Op op, size_t size, const uint8_t* got, size_t n, uint32_t key,
                   int from, size_t offset) {
  size_t errors = 0;
  for (size_t i = 0; i < n; ++i) {
    const uint8_t want = pattern(key, i);
    if (got[i] != want && errors++ == 0)
      std::fprintf(stderr,
                   "rank %d: %s %zu B: WRONG byte at %zu (block from rank %d, offset %zu): %u, "
                   "expected %u\n",
                   o.rank, kOpNames[op], size, offset + i, from, i, got[i], want);
  }
  return errors;
}

size_t check_floats(const Options& o, Op op, size_t size, const float* got, size_t n,
                    size_t first_index) {
  size_t errors = 0;
  for (size_t i = 0; i < n; ++i) {
    const float want = reduce_sum(o.nranks, first_index + i);
    if (got[i] != want && errors++ == 0)
      std::fprintf(stderr, "rank %d: %s %zu B: WRONG element %zu: %g, expected %g\n", o.rank,
                   kOpNames[op], size, i, got[i], want);
  }
  return errors;
}

// Enough iterations to time small sizes, few for large ones.
int iterations(const Options& o, size_t bytes) {
  const size_t n = o.iter_bytes / bytes;
  return static_cast<int>(n < 5 ? 5 : (n > 50 ? 50 : n));
}

template <typename Launch>
double time_op(int iters, cudaStream_t stream, Launch launch) {
  constexpr int kWarmup = 3;
  for (int i = 0; i < kWarmup; ++i) launch();
  cudaEvent_t start, stop;
  CUDA_CHECK(cudaEventCreate(&start));
  CUDA_CHECK(cudaEventCreate(&stop));
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

struct Context {
  const Options& o;
  ncclComm_t comm;
  cudaStream_t stream;
  void* send;
  void* recv;
};

template <typename T>
void upload(const Context& c, const std::vector<T>& host) {
  CUDA_CHECK(cudaMemcpy(c.send, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice));
}
template <typename T>
void download(const Context& c, std::vector<T>& host) {
  CUDA_CHECK(cudaMemcpy(host.data(), c.recv, host.size() * sizeof(T), cudaMemcpyDeviceToHost));
}
// 0xff everywhere: NaN as float, 255 as a byte; a skipped write shows.
void poison(const Context& c, size_t bytes) {
  CUDA_CHECK(cudaMemset(c.recv, 0xff, bytes));
}

Result run_all_reduce(const Context& c, size_t bytes) {
  const Options& o = c.o;
  const size_t count = bytes / sizeof(float);
  Result r;
  r.ran = true;
  r.bytes = count * sizeof(float);
  r.iters = iterations(o, r.bytes);
  std::vector<float> host(count);
  for (size_t i = 0; i < count; ++i) host[i] = reduce_input(o.rank, i);
  upload(c, host);
  poison(c, r.bytes);
  r.time_us = time_op(r.iters, c.stream, [&] {
    NCCL_CHECK(ncclAllReduce(c.send, c.recv, count, ncclFloat, ncclSum, c.comm, c.stream));
  });
  download(c, host);
  r.errors = check_floats(o, kAllReduce, r.bytes, host.data(), count, 0);
  return r;
}

// Every rank contributes bytes/n; the output holds all blocks in rank order.
Result run_all_gather(const Context& c, size_t bytes) {
  const Options& o = c.o;
  const int n = o.nranks;
  const size_t block = bytes / n;
  Result r;
  if (block == 0) return r;
  r.ran = true;
  r.bytes = block * n;
  r.iters = iterations(o, r.bytes);
  std::vector<uint8_t> host(block);
  fill(host.data(), block, key_of(kAllGather, o.rank, 0));
  upload(c, host);
  poison(c, r.bytes);
  r.time_us = time_op(r.iters, c.stream, [&] {
    NCCL_CHECK(ncclAllGather(c.send, c.recv, block, ncclUint8, c.comm, c.stream));
  });
  host.resize(r.bytes);
  download(c, host);
  for (int src = 0; src < n; ++src)
    r.errors += check_bytes(o, kAllGather, r.bytes, host.data() + src * block, block,
                            key_of(kAllGather, src, 0), src, src * block);
  return r;
}

// Every rank reduces the whole input and keeps its own block (bytes/n).
Result run_reduce_scatter(const Context& c, size_t bytes) {
  const Options& o = c.o;
  const int n = o.nranks;
  const size_t block = bytes / (sizeof(float) * n);
  Result r;
  if (block == 0) return r;
  r.ran = true;
  r.bytes = block * n * sizeof(float);
  r.iters = iterations(o, r.bytes);
  std::vector<float> host(block * n);
  for (size_t i = 0; i < host.size(); ++i) host[i] = reduce_input(o.rank, i);
  upload(c, host);
  poison(c, block * sizeof(float));
  r.time_us = time_op(r.iters, c.stream, [&] {
    NCCL_CHECK(ncclReduceScatter(c.send, c.recv, block, ncclFloat, ncclSum, c.comm, c.stream));
  });
  host.resize(block);
  download(c, host);
  r.errors = check_floats(o, kReduceScatter, r.bytes, host.data(), block, o.rank * block);
  return r;
}

// Root 0's bytes to everyone (the root receives its own copy too).
Result run_broadcast(const Context& c, size_t bytes) {
  const Options& o = c.o;
  constexpr int kRoot = 0;
  Result r;
  r.ran = true;
  r.bytes = bytes;
  r.iters = iterations(o, r.bytes);
  std::vector<uint8_t> host(bytes);
  fill(host.data(), bytes, key_of(kBroadcast, o.rank, 0));  // only the root's is sent
  upload(c, host);
  poison(c, bytes);
  r.time_us = time_op(r.iters, c.stream, [&] {
    NCCL_CHECK(ncclBroadcast(c.send, c.recv, bytes, ncclUint8, kRoot, c.comm, c.stream));
  });
  download(c, host);
  r.errors =
      check_bytes(o, kBroadcast, bytes, host.data(), bytes, key_of(kBroadcast, kRoot, 0), kRoot, 0);
  return r;
}

// Block p of the send buffer goes to rank p (itself included), arriving as
// block <sender> of the peer's receive buffer.
Result run_alltoall(const Context& c, size_t bytes) {
  const Options& o = c.o;
  const int n = o.nranks;
  const size_t block = bytes / n;
  Result r;
  if (block == 0) return r;
  r.ran = true;
  r.bytes = block * n;
  r.iters = iterations(o, r.bytes);
  std::vector<uint8_t> host(r.bytes);
  for (int dst = 0; dst < n; ++dst)
    fill(host.data() + dst * block, block, key_of(kAllToAll, o.rank, dst));
  upload(c, host);
  poison(c, r.bytes);
  uint8_t* send = static_cast<uint8_t*>(c.send);
  uint8_t* recv = static_cast<uint8_t*>(c.recv);
  r.time_us = time_op(r.iters, c.stream, [&] {
    NCCL_CHECK(ncclGroupStart());
    for (int peer = 0; peer < n; ++peer) {
      NCCL_CHECK(ncclSend(send + peer * block, block, ncclUint8, peer, c.comm, c.stream));
      NCCL_CHECK(ncclRecv(recv + peer * block, block, ncclUint8, peer, c.comm, c.stream));
    }
    NCCL_CHECK(ncclGroupEnd());
  });
  download(c, host);
  for (int src = 0; src < n; ++src)
    r.errors += check_bytes(o, kAllToAll, r.bytes, host.data() + src * block, block,
                            key_of(kAllToAll, src, o.rank), src, src * block);
  return r;
}

// Ring: send to rank+1, receive from rank-1.
Result run_sendrecv(const Context& c, size_t bytes) {
  const Options& o = c.o;
  const int next = (o.rank + 1) % o.nranks;
  const int prev = (o.rank + o.nranks - 1) % o.nranks;
  Result r;
  r.ran = true;
  r.bytes = bytes;
  r.iters = iterations(o, r.bytes);
  std::vector<uint8_t> host(bytes);
  fill(host.data(), bytes, key_of(kSendRecv, o.rank, next));
  upload(c, host);
  poison(c, bytes);
  r.time_us = time_op(r.iters, c.stream, [&] {
    NCCL_CHECK(ncclGroupStart());
    NCCL_CHECK(ncclSend(c.send, bytes, ncclUint8, next, c.comm, c.stream));
    NCCL_CHECK(ncclRecv(c.recv, bytes, ncclUint8, prev, c.comm, c.stream));
    NCCL_CHECK(ncclGroupEnd());
  });
  download(c, host);
  r.errors = check_bytes(o, kSendRecv, bytes, host.data(), bytes, key_of(kSendRecv, prev, o.rank),
                         prev, 0);
  return r;
}

Result run_op(Op op, const Context& c, size_t bytes) {
  switch (op) {
    case kAllReduce:
      return run_all_reduce(c, bytes);
    case kAllGather:
      return run_all_gather(c, bytes);
    case kReduceScatter:
      return run_reduce_scatter(c, bytes);
    case kBroadcast:
      return run_broadcast(c, bytes);
    case kAllToAll:
      return run_alltoall(c, bytes);
    default:
      return run_sendrecv(c, bytes);
  }
}

// The sum of every rank's error count, so rank 0's table shows a mismatch
// seen anywhere.
size_t errors_everywhere(const Context& c, size_t mine, uint64_t* device_word) {
  uint64_t word = mine;
  CUDA_CHECK(cudaMemcpy(device_word, &word, sizeof(word), cudaMemcpyHostToDevice));
  NCCL_CHECK(ncclAllReduce(device_word, device_word, 1, ncclUint64, ncclSum, c.comm, c.stream));
  CUDA_CHECK(cudaStreamSynchronize(c.stream));
  CUDA_CHECK(cudaMemcpy(&word, device_word, sizeof(word), cudaMemcpyDeviceToHost));
  return static_cast<size_t>(word);
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
  if (o.probe) return probe(o);
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
  uint64_t* error_word = nullptr;
  CUDA_CHECK(cudaMalloc(&error_word, sizeof(uint64_t)));
  const Context ctx{o, comm, stream, send, recv};

  const bool print = o.rank == 0;
  if (print) {
    std::printf("# weft-nccl-e2e: %d ranks, NCCL %d, device %d (%s), NCCL_NET=%s\n", o.nranks,
                nccl_version, o.device, prop.name,
                std::getenv("NCCL_NET") ? std::getenv("NCCL_NET") : "(unset)");
    std::printf(
        "# busbw factor: all_reduce 2(n-1)/n, all_gather (n-1)/n, reduce_scatter (n-1)/n, "
        "broadcast 1, alltoall (n-1)/n, sendrecv 1; GB/s = 1e9 bytes/s\n");
    std::printf("%-14s %12s %7s %11s %11s %11s %8s\n", "op", "bytes", "iters", "time_us",
                "algbw_GB/s", "busbw_GB/s", "check");
  }
  size_t my_errors = 0, all_errors = 0;
  for (size_t bytes : size_sweep(o)) {
    for (int op = 0; op < kNumOps; ++op) {
      if (!o.ops[op]) continue;
      const Result r = run_op(static_cast<Op>(op), ctx, bytes);
      if (!r.ran) continue;
      my_errors += r.errors;
      const size_t errors = errors_everywhere(ctx, r.errors, error_word);
      all_errors += errors;
      const double algbw = r.bytes / r.time_us / 1e3;
      if (print)
        std::printf("%-14s %12zu %7d %11.1f %11.3f %11.3f %8s\n", kOpNames[op], r.bytes, r.iters,
                    r.time_us, algbw, algbw * busbw_factor(static_cast<Op>(op), o.nranks),
                    errors ? "WRONG" : "ok");
    }
  }

  CUDA_CHECK(cudaFree(error_word));
  CUDA_CHECK(cudaFree(send));
  CUDA_CHECK(cudaFree(recv));
  NCCL_CHECK(ncclCommFinalize(comm));
  NCCL_CHECK(ncclCommDestroy(comm));
  CUDA_CHECK(cudaStreamDestroy(stream));
  std::printf("rank %d: %s (%zu wrong elements here, %zu on all ranks)\n", o.rank,
              all_errors ? "FAIL" : "PASS", my_errors, all_errors);
  return all_errors ? 1 : 0;
}
