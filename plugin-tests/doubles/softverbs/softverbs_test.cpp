// softverbs.unit: the libibverbs double behaves as a real RC device does
// where a verbs transport depends on it, with bytes checked, across
// processes (fork) and in loopback. Linked directly against softverbs: the
// inline ibv_post_send & co. from <infiniband/verbs.h> run its ops.
#include "softverbs.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <dlfcn.h>
#include <endian.h>
#include <fcntl.h>
#include <infiniband/verbs.h>
#include <net/if.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>
#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/lsan_interface.h>
#endif

#ifndef SOFTVERBS_LIB
#error "SOFTVERBS_LIB must name the built libibverbs.so.1"
#endif

namespace {

using Clock = std::chrono::steady_clock;

bool g_in_child = false;

// REQUIRE in the test process; in a forked child, report and exit 1.
#define ENSURE(cond)                                                                          \
  do {                                                                                        \
    if (!(cond)) {                                                                            \
      if (g_in_child) {                                                                       \
        std::fprintf(stderr, "child: %s:%d: ENSURE(%s) failed\n", __FILE__, __LINE__, #cond); \
        _exit(1);                                                                             \
      }                                                                                       \
      FAIL("ENSURE(" #cond ") failed");                                                       \
    }                                                                                         \
  } while (0)

// Knobs read at open time: short retries, a deterministic netdev.
struct Defaults {
  Defaults() {
    setenv("SOFTVERBS_RETRY_MS", "100", 0);
    setenv("SOFTVERBS_NETDEV", "lo", 0);
  }
} g_defaults;

class ScopedEnv {
 public:
  ScopedEnv(std::initializer_list<std::pair<const char*, const char*>> vars) {
    for (const auto& [name, value] : vars) {
      const char* old = std::getenv(name);
      saved_.emplace_back(name, old != nullptr ? std::optional<std::string>(old) : std::nullopt);
      if (value != nullptr) {
        setenv(name, value, 1);
      } else {
        unsetenv(name);
      }
    }
  }
  ~ScopedEnv() {
    for (const auto& [name, value] : saved_) {
      if (value) {
        setenv(name.c_str(), value->c_str(), 1);
      } else {
        unsetenv(name.c_str());
      }
    }
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  std::vector<std::pair<std::string, std::optional<std::string>>> saved_;
};

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

long count_dir(const char* path) {
  long n = 0;
  if (DIR* d = opendir(path)) {
    while (dirent* e = readdir(d)) {
      if (e->d_name[0] != '.') ++n;
    }
    closedir(d);
  }
  return n;
}

// This process's threads once those joined a moment ago have left
// /proc/self/task (pthread_join returns before the kernel drops the entry):
// waits up to a second for the count to reach `expected`.
long settled_threads(long expected) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(1);
  long n = count_dir("/proc/self/task");
  while (n != expected && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    n = count_dir("/proc/self/task");
  }
  return n;
}

// ---------------------------------------------------------------- objects --
struct Dev {
  ibv_context* ctx = nullptr;
  ibv_pd* pd = nullptr;

  explicit Dev(int index = 0) {
    int n = 0;
    ibv_device** list = ibv_get_device_list(&n);
    ENSURE(list != nullptr && n > index);
    ctx = ibv_open_device(list[index]);
    ibv_free_device_list(list);
    ENSURE(ctx != nullptr);
    pd = ibv_alloc_pd(ctx);
    ENSURE(pd != nullptr);
  }
  ~Dev() {
    if (pd != nullptr) ibv_dealloc_pd(pd);
    if (ctx != nullptr) ibv_close_device(ctx);
  }
  Dev(const Dev&) = delete;
  Dev& operator=(const Dev&) = delete;

  bool ib() {
    ibv_port_attr attr{};
    ibv_query_port(ctx, 1, &attr);
    return attr.link_layer == IBV_LINK_LAYER_INFINIBAND;
  }
};

struct Buf {
  std::vector<char> data;
  ibv_mr* mr = nullptr;

  Buf(Dev& dev, size_t size,
      int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ)
      : data(size) {
    mr = ibv_reg_mr(dev.pd, data.data(), size, access);
    ENSURE(mr != nullptr);
  }
  ~Buf() {
    if (mr != nullptr) ibv_dereg_mr(mr);
  }
  Buf(const Buf&) = delete;
  Buf& operator=(const Buf&) = delete;

  char* ptr(size_t offset = 0) { return data.data() + offset; }
  uint64_t addr(size_t offset = 0) { return reinterpret_cast<uintptr_t>(data.data()) + offset; }
};

// What one side tells the other.
struct Addr {
  uint32_t qpn = 0;
  uint16_t lid = 0;
  ibv_gid gid{};
  uint64_t addr = 0;
  uint32_t rkey = 0;
};

constexpr int kGidIndex = 3;  // ::ffff:127.0.0.1 RoCE v2 on lo

struct QpOptions {
  uint32_t send_wr = 256;
  uint32_t recv_wr = 256;
  uint32_t sge = 4;
  uint32_t inline_data = 64;
  int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
  uint8_t rnr_retry = 7;
  uint8_t min_rnr_timer = 1;  // 10 us
  int sq_sig_all = 0;
  uint32_t psn = 0;
  int gid_index = kGidIndex;
};

struct Ep {
  Dev& dev;
  ibv_cq* cq = nullptr;
  ibv_qp* qp = nullptr;
  bool own_cq = true;

  explicit Ep(Dev& d, QpOptions opt = {}, ibv_cq* shared_cq = nullptr) : dev(d) {
    if (shared_cq != nullptr) {
      cq = shared_cq;
      own_cq = false;
    } else {
      cq = ibv_create_cq(dev.ctx, 4096, nullptr, nullptr, 0);
      ENSURE(cq != nullptr);
    }
    ibv_qp_init_attr init{};
    init.send_cq = cq;
    init.recv_cq = cq;
    init.qp_type = IBV_QPT_RC;
    init.sq_sig_all = opt.sq_sig_all;
    init.cap.max_send_wr = opt.send_wr;
    init.cap.max_recv_wr = opt.recv_wr;
    init.cap.max_send_sge = opt.sge;
    init.cap.max_recv_sge = opt.sge;
    init.cap.max_inline_data = opt.inline_data;
    qp = ibv_create_qp(dev.pd, &init);
    ENSURE(qp != nullptr);
    options = opt;
  }
  ~Ep() {
    if (qp != nullptr) ibv_destroy_qp(qp);
    if (own_cq && cq != nullptr) ibv_destroy_cq(cq);
  }
  Ep(const Ep&) = delete;
  Ep& operator=(const Ep&) = delete;

  Addr addr() {
    Addr a;
    a.qpn = qp->qp_num;
    ibv_port_attr port{};
    ibv_query_port(dev.ctx, 1, &port);
    a.lid = port.lid;
    ENSURE(ibv_query_gid(dev.ctx, 1, dev.ib() ? 0 : options.gid_index, &a.gid) == 0);
    return a;
  }

  int init() {
    ibv_qp_attr attr{};
    attr.qp_state = IBV_QPS_INIT;
    attr.port_num = 1;
    attr.qp_access_flags = static_cast<unsigned>(options.access);
    return ibv_modify_qp(qp, &attr,
                         IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
  }
  int rtr(const Addr& remote) {
    ibv_qp_attr attr{};
    attr.qp_state = IBV_QPS_RTR;
    attr.path_mtu = IBV_MTU_1024;
    attr.dest_qp_num = remote.qpn;
    attr.rq_psn = options.psn;
    attr.max_dest_rd_atomic = 1;
    attr.min_rnr_timer = options.min_rnr_timer;
    attr.ah_attr.port_num = 1;
    if (dev.ib()) {
      attr.ah_attr.dlid = remote.lid;
    } else {
      attr.ah_attr.is_global = 1;
      attr.ah_attr.grh.dgid = remote.gid;
      attr.ah_attr.grh.sgid_index = static_cast<uint8_t>(options.gid_index);
      attr.ah_attr.grh.hop_limit = 1;
    }
    return ibv_modify_qp(qp, &attr,
                         IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                             IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
  }
  int rts() {
    ibv_qp_attr attr{};
    attr.qp_state = IBV_QPS_RTS;
    attr.timeout = 14;
    attr.retry_cnt = 7;
    attr.rnr_retry = options.rnr_retry;
    attr.sq_psn = options.psn;
    attr.max_rd_atomic = 1;
    return ibv_modify_qp(qp, &attr,
                         IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                             IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC);
  }
  void connect(const Addr& remote) {
    ENSURE(init() == 0);
    ENSURE(rtr(remote) == 0);
    ENSURE(rts() == 0);
  }
  ibv_qp_state state() {
    ibv_qp_attr attr{};
    ibv_qp_init_attr init{};
    ENSURE(ibv_query_qp(qp, &attr, IBV_QP_STATE, &init) == 0);
    return attr.qp_state;
  }

  QpOptions options;
};

int post_rdma(ibv_qp* qp, uint64_t wr_id, ibv_wr_opcode op, void* local, uint32_t len,
              uint32_t lkey, uint64_t remote, uint32_t rkey, unsigned flags = IBV_SEND_SIGNALED,
              uint32_t imm = 0) {
  ibv_sge sge{reinterpret_cast<uintptr_t>(local), len, lkey};
  ibv_send_wr wr{};
  wr.wr_id = wr_id;
  wr.sg_list = len > 0 ? &sge : nullptr;
  wr.num_sge = len > 0 ? 1 : 0;
  wr.opcode = op;
  wr.send_flags = flags;
  wr.imm_data = imm;
  wr.wr.rdma.remote_addr = remote;
  wr.wr.rdma.rkey = rkey;
  ibv_send_wr* bad = nullptr;
  return ibv_post_send(qp, &wr, &bad);
}

int post_recv(ibv_qp* qp, uint64_t wr_id, void* addr, uint32_t len, uint32_t lkey) {
  ibv_sge sge{reinterpret_cast<uintptr_t>(addr), len, lkey};
  ibv_recv_wr wr{};
  wr.wr_id = wr_id;
  wr.sg_list = len > 0 ? &sge : nullptr;
  wr.num_sge = len > 0 ? 1 : 0;
  ibv_recv_wr* bad = nullptr;
  return ibv_post_recv(qp, &wr, &bad);
}

std::vector<ibv_wc> poll_n(ibv_cq* cq, size_t n, int timeout_ms = 5000) {
  std::vector<ibv_wc> out;
  auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
  ibv_wc wc[16];
  while (out.size() < n && Clock::now() < deadline) {
    int got = ibv_poll_cq(cq, static_cast<int>(std::min<size_t>(16, n - out.size())), wc);
    ENSURE(got >= 0);
    out.insert(out.end(), wc, wc + got);
    if (got == 0) usleep(50);
  }
  return out;
}

ibv_wc poll_one(ibv_cq* cq, int timeout_ms = 5000) {
  auto v = poll_n(cq, 1, timeout_ms);
  ENSURE(v.size() == 1);
  return v[0];
}

// Nothing more arrives within ms.
bool quiet(ibv_cq* cq, int ms) {
  return poll_n(cq, 1, ms).empty();
}

void fill(char* p, size_t n, uint32_t seed) {
  for (size_t i = 0; i < n; ++i) p[i] = static_cast<char>((i * 131 + seed * 7 + (i >> 8)) & 0xff);
}

bool check(const char* p, size_t n, uint32_t seed) {
  for (size_t i = 0; i < n; ++i) {
    if (p[i] != static_cast<char>((i * 131 + seed * 7 + (i >> 8)) & 0xff)) return false;
  }
  return true;
}

softverbs_counters counters() {
  softverbs_counters c{};
  softverbs_get_counters(&c);
  return c;
}

// ------------------------------------------------------------ processes ----
template <typename T>
void put(int fd, const T& value) {
  ENSURE(write(fd, &value, sizeof(value)) == static_cast<ssize_t>(sizeof(value)));
}

template <typename T>
T get(int fd, int timeout_ms = 10000) {
  T value{};
  char* p = reinterpret_cast<char*>(&value);
  size_t got = 0;
  while (got < sizeof(value)) {
    pollfd pfd{fd, POLLIN, 0};
    ENSURE(poll(&pfd, 1, timeout_ms) == 1);
    ssize_t r = read(fd, p + got, sizeof(value) - got);
    ENSURE(r > 0);
    got += static_cast<size_t>(r);
  }
  return value;
}

// A forked peer process running fn(fd); fd is its end of a socketpair.
class Child {
 public:
  explicit Child(const std::function<void(int)>& fn) {
    int sv[2];
    REQUIRE(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0);
    std::fflush(nullptr);
    pid_ = fork();
    REQUIRE(pid_ >= 0);
    if (pid_ == 0) {
      close(sv[0]);
      g_in_child = true;
      alarm(60);  // never hang a test run
      fn(sv[1]);
      _exit(0);
    }
    close(sv[1]);
    fd_ = sv[0];
  }
  ~Child() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    close(fd_);
  }
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;

  int fd() const { return fd_; }
  pid_t pid() const { return pid_; }

  // Exit status, or -1 on timeout / signal.
  int wait(int timeout_ms = 20000) {
    auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
    while (Clock::now() < deadline) {
      int status = 0;
      pid_t r = waitpid(pid_, &status, WNOHANG);
      if (r == pid_) {
        pid_ = -1;
        return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
      }
      usleep(1000);
    }
    return -1;
  }
  void kill_now() {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }

 private:
  pid_t pid_ = -1;
  int fd_ = -1;
};

// Both ends of a loopback connection in this process.
struct Pair {
  Ep a;
  Ep b;
  Pair(Dev& dev, QpOptions oa = {}, QpOptions ob = {}) : a(dev, oa), b(dev, ob) {
    a.connect(b.addr());
    b.connect(a.addr());
  }
};

}  // namespace

// ================================================================ devices ==
TEST_CASE("softverbs: exported as libibverbs with a device list", "[softverbs]") {
  REQUIRE(softverbs_present() == 1);
  ScopedEnv env{{"SOFTVERBS_DEVICES", "2"}};
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  REQUIRE(list != nullptr);
  REQUIRE(n == 2);
  CHECK(list[2] == nullptr);
  CHECK(std::string(ibv_get_device_name(list[0])) == "softverbs0");
  CHECK(std::string(ibv_get_device_name(list[1])) == "softverbs1");
  CHECK(ibv_get_device_guid(list[0]) != ibv_get_device_guid(list[1]));
  CHECK(ibv_get_device_guid(list[0]) != 0);
  ibv_free_device_list(list);
  REQUIRE(ibv_fork_init() == 0);
  CHECK(std::string(ibv_wc_status_str(IBV_WC_REM_ACCESS_ERR)).find("remote access") !=
        std::string::npos);
  CHECK(std::string(ibv_event_type_str(IBV_EVENT_PORT_ERR)) == "port error");
}

TEST_CASE("softverbs: RoCE device attributes, GID table and sysfs", "[softverbs]") {
  ScopedEnv env{{"SOFTVERBS_DEVICES", "2"},
                {"SOFTVERBS_LINK", "eth"},
                {"SOFTVERBS_PCI_PATHS", "/sys/devices/pci0000:00/0000:00:02.0,/nonexistent/pci1"}};
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  REQUIRE(n == 2);
  std::string path0 = list[0]->ibdev_path;
  std::string path1 = list[1]->ibdev_path;
  ibv_context* ctx = ibv_open_device(list[1]);
  ibv_free_device_list(list);
  REQUIRE(ctx != nullptr);

  ibv_device_attr dev{};
  REQUIRE(ibv_query_device(ctx, &dev) == 0);
  CHECK(std::string(dev.fw_ver) == "softverbs 1.0");
  CHECK(dev.max_qp_wr == 16384);
  CHECK(dev.max_sge == 32);
  CHECK(dev.max_cqe == (1 << 20));
  CHECK(dev.phys_port_cnt == 1);
  CHECK(dev.atomic_cap == IBV_ATOMIC_NONE);
  CHECK(dev.vendor_id == 0x1de5);
  CHECK(dev.node_guid != 0);

  ibv_port_attr port{};
  REQUIRE(ibv_query_port(ctx, 1, &port) == 0);
  CHECK(port.state == IBV_PORT_ACTIVE);
  CHECK(port.phys_state == 5);
  CHECK(port.link_layer == IBV_LINK_LAYER_ETHERNET);
  CHECK(port.active_mtu == IBV_MTU_1024);
  CHECK(port.max_mtu == IBV_MTU_4096);
  CHECK(port.active_speed == 32);
  CHECK(port.active_width == 2);
  CHECK(port.lid == 0);
  CHECK(port.max_msg_sz == (1u << 31));
  CHECK(port.gid_tbl_len >= 4);
  CHECK(ibv_query_port(ctx, 2, &port) != 0);

  // rxe's layout on lo: fe80::<guid> v1, v2, then ::ffff:127.0.0.1 v1, v2.
  ibv_gid_entry e{};
  REQUIRE(ibv_query_gid_ex(ctx, 1, 0, &e, 0) == 0);
  CHECK(e.gid.raw[0] == 0xfe);
  CHECK(e.gid.raw[1] == 0x80);
  CHECK(e.gid_type == IBV_GID_TYPE_ROCE_V1);
  CHECK(e.gid_index == 0);
  CHECK(e.port_num == 1);
  CHECK(e.ndev_ifindex == if_nametoindex("lo"));
  ibv_gid_entry e1{};
  REQUIRE(ibv_query_gid_ex(ctx, 1, 1, &e1, 0) == 0);
  CHECK(e1.gid_type == IBV_GID_TYPE_ROCE_V2);
  CHECK(std::memcmp(e.gid.raw, e1.gid.raw, 16) == 0);
  ibv_gid_entry e3{};
  REQUIRE(ibv_query_gid_ex(ctx, 1, 3, &e3, 0) == 0);
  CHECK(e3.gid_type == IBV_GID_TYPE_ROCE_V2);
  const uint8_t v4[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 127, 0, 0, 1};
  CHECK(std::memcmp(e3.gid.raw, v4, 16) == 0);
  ibv_gid_entry e4{};
  CHECK(ibv_query_gid_ex(ctx, 1, 4, &e4, 0) == ENODATA);
  CHECK(ibv_query_gid_ex(ctx, 1, 1000, &e4, 0) == EINVAL);
  ibv_gid gid{};
  gid.raw[0] = 1;
  CHECK(ibv_query_gid(ctx, 1, 4, &gid) == 0);  // empty slot reads as zeros
  CHECK(gid.raw[0] == 0);
  REQUIRE(ibv_query_gid(ctx, 1, 2, &gid) == 0);
  CHECK(std::memcmp(gid.raw, v4, 16) == 0);

  // The fake sysfs behind ibdev_path says the same.
  CHECK(read_file(path1 + "/ports/1/gid_attrs/types/0") == "IB/RoCE v1\n");
  CHECK(read_file(path1 + "/ports/1/gid_attrs/types/1") == "RoCE v2\n");
  CHECK(read_file(path1 + "/ports/1/gid_attrs/types/3") == "RoCE v2\n");
  CHECK(read_file(path1 + "/ports/1/gid_attrs/ndevs/3") == "lo\n");
  CHECK(access((path1 + "/ports/1/gid_attrs/types/4").c_str(), F_OK) != 0);
  CHECK(read_file(path1 + "/ports/1/rate") == "100 Gb/sec (4X EDR)\n");
  CHECK(read_file(path1 + "/ports/1/link_layer") == "Ethernet\n");
  uint64_t guid = be64toh(dev.node_guid);
  char text[32];
  std::snprintf(text, sizeof(text), "%04x:%04x:%04x:%04x\n", static_cast<unsigned>(guid >> 48),
                static_cast<unsigned>((guid >> 32) & 0xffff),
                static_cast<unsigned>((guid >> 16) & 0xffff), static_cast<unsigned>(guid & 0xffff));
  CHECK(read_file(path1 + "/node_guid") == text);
  char link[256] = {};
  REQUIRE(readlink((path0 + "/device").c_str(), link, sizeof(link) - 1) > 0);
  CHECK(std::string(link) == "/sys/devices/pci0000:00/0000:00:02.0");
  REQUIRE(readlink((path1 + "/device").c_str(), link, sizeof(link) - 1) > 0);
  REQUIRE(ibv_close_device(ctx) == 0);
}

TEST_CASE("softverbs: InfiniBand ports have distinct LIDs and an IB GID", "[softverbs]") {
  ScopedEnv env{{"SOFTVERBS_DEVICES", "2"}, {"SOFTVERBS_PORTS", "2"},
                {"SOFTVERBS_LINK", "ib"},   {"SOFTVERBS_SPEED", "64"},
                {"SOFTVERBS_WIDTH", "2"},   {"SOFTVERBS_PCI_PATHS", nullptr}};
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  REQUIRE(n == 2);
  std::vector<uint16_t> lids;
  std::string path0 = list[0]->ibdev_path;
  for (int d = 0; d < 2; ++d) {
    ibv_context* ctx = ibv_open_device(list[d]);
    REQUIRE(ctx != nullptr);
    ibv_device_attr dev{};
    REQUIRE(ibv_query_device(ctx, &dev) == 0);
    CHECK(dev.phys_port_cnt == 2);
    for (uint8_t p = 1; p <= 2; ++p) {
      ibv_port_attr port{};
      REQUIRE(ibv_query_port(ctx, p, &port) == 0);
      CHECK(port.link_layer == IBV_LINK_LAYER_INFINIBAND);
      CHECK(port.active_mtu == IBV_MTU_4096);
      CHECK(port.active_speed == 64);
      CHECK(port.lid != 0);
      lids.push_back(port.lid);
      ibv_gid_entry e{};
      REQUIRE(ibv_query_gid_ex(ctx, p, 0, &e, 0) == 0);
      CHECK(e.gid_type == IBV_GID_TYPE_IB);
      CHECK(e.gid.raw[0] == 0xfe);
      CHECK(e.ndev_ifindex == 0);
      CHECK(ibv_query_gid_ex(ctx, p, 1, &e, 0) == ENODATA);
    }
    REQUIRE(ibv_close_device(ctx) == 0);
  }
  ibv_free_device_list(list);
  std::sort(lids.begin(), lids.end());
  CHECK(std::unique(lids.begin(), lids.end()) == lids.end());
  CHECK(read_file(path0 + "/ports/2/gid_attrs/types/0") == "IB/RoCE v1\n");
  CHECK(read_file(path0 + "/ports/1/rate") == "200 Gb/sec (4X HDR)\n");
  CHECK(access((path0 + "/device").c_str(), F_OK) != 0);
}

// ===================================================== two processes =======
TEST_CASE("softverbs: two processes: write, write-with-imm, read, send, inline", "[softverbs]") {
  constexpr size_t kSize = 8 << 20;
  Child child([](int fd) {
    Dev dev;
    Ep ep(dev);
    Buf target(dev, kSize);
    Buf recv(dev, 8192);
    fill(target.ptr(1 << 20), 1 << 20, 77);  // what the peer reads
    Addr me = ep.addr();
    me.addr = target.addr();
    me.rkey = target.mr->rkey;
    put(fd, me);
    ep.connect(get<Addr>(fd));
    // Receives for: write-imm, zero-byte write-imm, send, send-imm inline,
    // and the final marker.
    for (int i = 0; i < 5; ++i) {
      ENSURE(post_recv(ep.qp, 100 + i, recv.ptr(i * 1024), 1024, recv.mr->lkey) == 0);
    }
    put(fd, 'r');
    auto wcs = poll_n(ep.cq, 4, 10000);
    ENSURE(wcs.size() == 4);
    for (int i = 0; i < 4; ++i) {
      ENSURE(wcs[i].status == IBV_WC_SUCCESS);
      ENSURE(wcs[i].wr_id == static_cast<uint64_t>(100 + i));
      ENSURE(wcs[i].qp_num == ep.qp->qp_num);
    }
    ENSURE(wcs[0].opcode == IBV_WC_RECV_RDMA_WITH_IMM);
    ENSURE(wcs[0].byte_len == 4096);
    ENSURE((wcs[0].wc_flags & IBV_WC_WITH_IMM) != 0);
    ENSURE(wcs[0].imm_data == htonl(0x12345678));
    ENSURE(check(target.ptr(2 << 20), 4096, 2));
    ENSURE(wcs[1].opcode == IBV_WC_RECV_RDMA_WITH_IMM);
    ENSURE(wcs[1].byte_len == 0);
    ENSURE(wcs[1].imm_data == htonl(7));
    ENSURE(wcs[2].opcode == IBV_WC_RECV);
    ENSURE(wcs[2].byte_len == 100);
    ENSURE((wcs[2].wc_flags & IBV_WC_WITH_IMM) == 0);
    ENSURE(check(recv.ptr(2048), 100, 3));
    ENSURE(wcs[3].opcode == IBV_WC_RECV);
    ENSURE(wcs[3].byte_len == 20);
    ENSURE((wcs[3].wc_flags & IBV_WC_WITH_IMM) != 0);
    ENSURE(wcs[3].imm_data == htonl(99));
    ENSURE(std::memcmp(recv.ptr(3072), "inline payload 12345", 20) == 0);
    // RC order: the marker lands after the plain writes posted before it.
    ibv_wc marker = poll_one(ep.cq, 20000);
    ENSURE(marker.status == IBV_WC_SUCCESS);
    ENSURE(marker.imm_data == htonl(1000));
    ENSURE(check(target.ptr(0), 65536, 1));
    ENSURE(check(target.ptr(4 << 20), 4 << 20, 5));
    put(fd, 'k');
    ENSURE(get<char>(fd) == 'q');
  });
  Dev dev;
  Ep ep(dev);
  Buf src(dev, kSize);
  Addr peer = get<Addr>(child.fd());
  put(child.fd(), ep.addr());
  ep.connect(peer);
  REQUIRE(get<char>(child.fd()) == 'r');

  fill(src.ptr(0), 65536, 1);
  REQUIRE(post_rdma(ep.qp, 1, IBV_WR_RDMA_WRITE, src.ptr(0), 65536, src.mr->lkey, peer.addr,
                    peer.rkey) == 0);
  fill(src.ptr(65536), 4096, 2);
  REQUIRE(post_rdma(ep.qp, 2, IBV_WR_RDMA_WRITE_WITH_IMM, src.ptr(65536), 4096, src.mr->lkey,
                    peer.addr + (2 << 20), peer.rkey, IBV_SEND_SIGNALED, htonl(0x12345678)) == 0);
  REQUIRE(post_rdma(ep.qp, 3, IBV_WR_RDMA_WRITE_WITH_IMM, nullptr, 0, 0, 0, 0, IBV_SEND_SIGNALED,
                    htonl(7)) == 0);
  fill(src.ptr(1 << 20), 100, 3);
  REQUIRE(post_rdma(ep.qp, 4, IBV_WR_SEND, src.ptr(1 << 20), 100, src.mr->lkey, 0, 0) == 0);
  {
    char text[] = "inline payload 12345";
    // Inline: the lkey is ignored and the buffer reusable at once.
    REQUIRE(post_rdma(ep.qp, 5, IBV_WR_SEND_WITH_IMM, text, 20, 0xdeadbeef, 0, 0,
                      IBV_SEND_SIGNALED | IBV_SEND_INLINE, htonl(99)) == 0);
    std::memset(text, 'x', sizeof(text));
  }
  Buf readback(dev, 1 << 20);
  REQUIRE(post_rdma(ep.qp, 6, IBV_WR_RDMA_READ, readback.ptr(), 1 << 20, readback.mr->lkey,
                    peer.addr + (1 << 20), peer.rkey) == 0);
  fill(src.ptr(4 << 20), 4 << 20, 5);
  REQUIRE(post_rdma(ep.qp, 7, IBV_WR_RDMA_WRITE, src.ptr(4 << 20), 4 << 20, src.mr->lkey,
                    peer.addr + (4 << 20), peer.rkey) == 0);
  REQUIRE(post_rdma(ep.qp, 8, IBV_WR_RDMA_WRITE_WITH_IMM, nullptr, 0, 0, 0, 0, 0, htonl(1000)) ==
          0);
  auto wcs = poll_n(ep.cq, 7, 10000);
  REQUIRE(wcs.size() == 7);
  const ibv_wc_opcode expected[] = {IBV_WC_RDMA_WRITE, IBV_WC_RDMA_WRITE, IBV_WC_RDMA_WRITE,
                                    IBV_WC_SEND,       IBV_WC_SEND,       IBV_WC_RDMA_READ,
                                    IBV_WC_RDMA_WRITE};
  for (size_t i = 0; i < 7; ++i) {
    INFO("completion " << i);
    CHECK(wcs[i].status == IBV_WC_SUCCESS);
    CHECK(wcs[i].wr_id == i + 1);
    CHECK(wcs[i].opcode == expected[i]);
    CHECK(wcs[i].qp_num == ep.qp->qp_num);
  }
  CHECK(wcs[5].byte_len == (1u << 20));
  CHECK(check(readback.ptr(), 1 << 20, 77));
  REQUIRE(get<char>(child.fd(), 30000) == 'k');
  put(child.fd(), 'q');
  REQUIRE(child.wait() == 0);
}

TEST_CASE("softverbs: four QPs in parallel keep their order", "[softverbs]") {
  constexpr int kQps = 4;
  constexpr int kMessages = 300;
  constexpr size_t kSlot = 8192;
  Child child([](int fd) {
    Dev dev;
    ibv_cq* cq = ibv_create_cq(dev.ctx, 4096, nullptr, nullptr, 0);
    std::vector<std::unique_ptr<Ep>> eps;
    Buf target(dev, kQps * kSlot * 4);
    QpOptions opt;
    opt.recv_wr = kMessages;
    for (int q = 0; q < kQps; ++q) {
      eps.push_back(std::make_unique<Ep>(dev, opt, cq));
      ENSURE(eps[q]->init() == 0);  // receives need INIT at least
      for (int i = 0; i < kMessages; ++i) ENSURE(post_recv(eps[q]->qp, q, nullptr, 0, 0) == 0);
      Addr a = eps[q]->addr();
      a.addr = target.addr(static_cast<size_t>(q) * kSlot * 4);
      a.rkey = target.mr->rkey;
      put(fd, a);
    }
    for (int q = 0; q < kQps; ++q) {
      ENSURE(eps[q]->rtr(get<Addr>(fd)) == 0);
      ENSURE(eps[q]->rts() == 0);
    }
    put(fd, 'r');
    std::map<uint32_t, int> next;  // qpn -> next expected sequence number
    auto wcs = poll_n(cq, kQps * kMessages, 20000);
    ENSURE(wcs.size() == static_cast<size_t>(kQps * kMessages));
    for (const ibv_wc& wc : wcs) {
      ENSURE(wc.status == IBV_WC_SUCCESS);
      ENSURE(wc.opcode == IBV_WC_RECV_RDMA_WITH_IMM);
      int seq = static_cast<int>(ntohl(wc.imm_data));
      ENSURE(seq == next[wc.qp_num]++);  // RC: in posting order
      ENSURE(wc.byte_len == kSlot);
    }
    // Each QP's last write is intact: its imm came after its data.
    for (int q = 0; q < kQps; ++q) {
      ENSURE(check(target.ptr(static_cast<size_t>(q) * kSlot * 4 + ((kMessages - 1) % 4) * kSlot),
                   kSlot, static_cast<uint32_t>(q * 1000 + kMessages - 1)));
    }
    put(fd, 'k');
    ENSURE(get<char>(fd) == 'q');
    for (auto& ep : eps) ep.reset();
    ibv_destroy_cq(cq);
  });
  Dev dev;
  ibv_cq* cq = ibv_create_cq(dev.ctx, 4096, nullptr, nullptr, 0);
  std::vector<std::unique_ptr<Ep>> eps;
  std::vector<Addr> peers;
  for (int q = 0; q < kQps; ++q) {
    eps.push_back(std::make_unique<Ep>(dev, QpOptions{}, cq));
    peers.push_back(get<Addr>(child.fd()));
  }
  for (int q = 0; q < kQps; ++q) put(child.fd(), eps[q]->addr());
  for (int q = 0; q < kQps; ++q) eps[q]->connect(peers[q]);
  REQUIRE(get<char>(child.fd()) == 'r');
  Buf src(dev, kQps * kMessages * kSlot);
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int q = 0; q < kQps; ++q) {
    threads.emplace_back([&, q] {
      for (int i = 0; i < kMessages; ++i) {
        char* p = src.ptr((static_cast<size_t>(q) * kMessages + i) * kSlot);
        fill(p, kSlot, static_cast<uint32_t>(q * 1000 + i));
        // Signal every 16th: slots free up as those completions are polled.
        unsigned flags = (i % 16 == 15 || i == kMessages - 1) ? IBV_SEND_SIGNALED : 0;
        int rc;
        while ((rc = post_rdma(eps[q]->qp, static_cast<uint64_t>(q) << 32 | i,
                               IBV_WR_RDMA_WRITE_WITH_IMM, p, kSlot, src.mr->lkey,
                               peers[q].addr + (i % 4) * kSlot, peers[q].rkey, flags,
                               htonl(static_cast<uint32_t>(i)))) == ENOMEM) {
          std::this_thread::yield();
        }
        if (rc != 0) ++failures;
      }
    });
  }
  // Poll from this thread while the others post (one CQ, four QPs).
  std::map<uint64_t, int> done;
  size_t expected = kQps * ((kMessages + 15) / 16);
  size_t seen = 0;
  auto deadline = Clock::now() + std::chrono::seconds(20);
  while (seen < expected && Clock::now() < deadline) {
    ibv_wc wc[8];
    int n = ibv_poll_cq(cq, 8, wc);
    for (int i = 0; i < n; ++i) {
      CHECK(wc[i].status == IBV_WC_SUCCESS);
      ++seen;
    }
    if (n == 0) usleep(20);
  }
  for (auto& t : threads) t.join();
  CHECK(failures == 0);
  CHECK(seen == expected);
  REQUIRE(get<char>(child.fd(), 30000) == 'k');
  put(child.fd(), 'q');
  REQUIRE(child.wait() == 0);
  eps.clear();
  ibv_destroy_cq(cq);
}

// ================================================================ loopback ==
TEST_CASE("softverbs: loopback QPs in one process, a QP connected to itself", "[softverbs]") {
  Dev dev;
  Buf buf(dev, 1 << 16);
  Pair pair(dev);
  fill(buf.ptr(0), 4096, 11);
  REQUIRE(post_rdma(pair.a.qp, 1, IBV_WR_RDMA_WRITE, buf.ptr(0), 4096, buf.mr->lkey, buf.addr(8192),
                    buf.mr->rkey) == 0);
  ibv_wc wc = poll_one(pair.a.cq);
  CHECK(wc.status == IBV_WC_SUCCESS);
  CHECK(check(buf.ptr(8192), 4096, 11));
  // The 1-byte flush read NCCL does through a loopback QP.
  REQUIRE(post_rdma(pair.b.qp, 2, IBV_WR_RDMA_READ, buf.ptr(20000), 1, buf.mr->lkey, buf.addr(8192),
                    buf.mr->rkey) == 0);
  wc = poll_one(pair.b.cq);
  CHECK(wc.status == IBV_WC_SUCCESS);
  CHECK(wc.opcode == IBV_WC_RDMA_READ);
  CHECK(buf.ptr(20000)[0] == buf.ptr(8192)[0]);

  Ep self(dev);
  self.connect(self.addr());
  REQUIRE(post_recv(self.qp, 9, nullptr, 0, 0) == 0);
  REQUIRE(post_rdma(self.qp, 3, IBV_WR_RDMA_WRITE_WITH_IMM, buf.ptr(0), 16, buf.mr->lkey,
                    buf.addr(40000), buf.mr->rkey, IBV_SEND_SIGNALED, 5) == 0);
  auto wcs = poll_n(self.cq, 2);
  REQUIRE(wcs.size() == 2);
  CHECK(wcs[0].status == IBV_WC_SUCCESS);
  CHECK(wcs[1].status == IBV_WC_SUCCESS);
  CHECK(std::memcmp(buf.ptr(40000), buf.ptr(0), 16) == 0);
}

TEST_CASE("softverbs: InfiniBand loopback addresses by LID", "[softverbs]") {
  ScopedEnv env{{"SOFTVERBS_LINK", "ib"}};
  Dev dev;
  Buf buf(dev, 8192);
  Pair pair(dev);
  fill(buf.ptr(0), 100, 4);
  REQUIRE(post_rdma(pair.a.qp, 1, IBV_WR_RDMA_WRITE, buf.ptr(0), 100, buf.mr->lkey, buf.addr(4096),
                    buf.mr->rkey) == 0);
  CHECK(poll_one(pair.a.cq).status == IBV_WC_SUCCESS);
  CHECK(check(buf.ptr(4096), 100, 4));
  // A wrong DLID reaches nobody: the WR times out.
  Ep lost(dev);
  Addr wrong = pair.b.addr();
  wrong.lid = static_cast<uint16_t>(wrong.lid + 1000);
  lost.connect(wrong);
  REQUIRE(post_rdma(lost.qp, 2, IBV_WR_RDMA_WRITE, buf.ptr(0), 8, buf.mr->lkey, buf.addr(4096),
                    buf.mr->rkey) == 0);
  CHECK(poll_one(lost.cq, 3000).status == IBV_WC_RETRY_EXC_ERR);
}

// ============================================================ QP contract ==
TEST_CASE("softverbs: QP creation limits and state machine", "[softverbs]") {
  Dev dev;
  ibv_cq* cq = ibv_create_cq(dev.ctx, 16, nullptr, nullptr, 0);
  REQUIRE(cq != nullptr);
  ibv_qp_init_attr init{};
  init.send_cq = cq;
  init.recv_cq = cq;
  init.qp_type = IBV_QPT_UD;
  init.cap = {16, 16, 1, 1, 0};
  errno = 0;
  CHECK(ibv_create_qp(dev.pd, &init) == nullptr);
  CHECK(errno == EOPNOTSUPP);
  init.qp_type = IBV_QPT_RC;
  init.cap.max_send_wr = 16385;
  CHECK(ibv_create_qp(dev.pd, &init) == nullptr);
  CHECK(errno == EINVAL);
  init.cap = {16, 16, 33, 1, 0};
  CHECK(ibv_create_qp(dev.pd, &init) == nullptr);
  init.cap = {16, 16, 1, 1, 257};
  CHECK(ibv_create_qp(dev.pd, &init) == nullptr);
  init.cap = {16, 16, 2, 3, 256};
  ibv_qp* qp = ibv_create_qp(dev.pd, &init);
  REQUIRE(qp != nullptr);
  CHECK(init.cap.max_inline_data == 256);
  CHECK(init.cap.max_send_sge == 2);
  CHECK(qp->qp_num != 0);
  CHECK(qp->qp_num < (1u << 24));
  CHECK(ibv_destroy_cq(cq) == EBUSY);  // still used by the QP

  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_RTR;
  CHECK(ibv_modify_qp(qp, &attr, IBV_QP_STATE) == EINVAL);  // RESET -> RTR
  attr.qp_state = IBV_QPS_INIT;
  attr.port_num = 1;
  CHECK(ibv_modify_qp(qp, &attr, IBV_QP_STATE | IBV_QP_PORT | IBV_QP_PKEY_INDEX) == EINVAL);
  attr.port_num = 2;
  CHECK(ibv_modify_qp(qp, &attr,
                      IBV_QP_STATE | IBV_QP_PORT | IBV_QP_PKEY_INDEX | IBV_QP_ACCESS_FLAGS) ==
        EINVAL);
  attr.port_num = 1;
  REQUIRE(ibv_modify_qp(qp, &attr,
                        IBV_QP_STATE | IBV_QP_PORT | IBV_QP_PKEY_INDEX | IBV_QP_ACCESS_FLAGS) == 0);
  CHECK(qp->state == IBV_QPS_INIT);
  char byte = 0;
  Buf buf(dev, 64);
  CHECK(post_rdma(qp, 1, IBV_WR_RDMA_WRITE, &byte, 1, buf.mr->lkey, 0, 0) == EINVAL);  // not RTS
  CHECK(post_recv(qp, 1, buf.ptr(), 8, buf.mr->lkey) == 0);  // receives are fine in INIT
  attr.qp_state = IBV_QPS_RTR;
  attr.path_mtu = IBV_MTU_1024;
  attr.dest_qp_num = qp->qp_num;
  attr.ah_attr.is_global = 0;  // RoCE needs a GRH
  int rtr_mask = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                 IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
  CHECK(ibv_modify_qp(qp, &attr, rtr_mask) == EINVAL);
  attr.ah_attr.is_global = 1;
  attr.ah_attr.grh.sgid_index = kGidIndex;
  ibv_query_gid(dev.ctx, 1, kGidIndex, &attr.ah_attr.grh.dgid);
  CHECK(ibv_modify_qp(qp, &attr, rtr_mask & ~IBV_QP_MIN_RNR_TIMER) == EINVAL);
  attr.ah_attr.grh.sgid_index = 7;  // an empty GID slot
  CHECK(ibv_modify_qp(qp, &attr, rtr_mask) == EINVAL);
  attr.ah_attr.grh.sgid_index = kGidIndex;
  REQUIRE(ibv_modify_qp(qp, &attr, rtr_mask) == 0);
  attr.qp_state = IBV_QPS_RTS;
  attr.retry_cnt = 7;
  attr.rnr_retry = 7;
  int rts_mask = IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                 IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC;
  CHECK(ibv_modify_qp(qp, &attr, rts_mask & ~IBV_QP_SQ_PSN) == EINVAL);
  attr.retry_cnt = 8;
  CHECK(ibv_modify_qp(qp, &attr, rts_mask) == EINVAL);
  attr.retry_cnt = 7;
  REQUIRE(ibv_modify_qp(qp, &attr, rts_mask) == 0);
  ibv_qp_attr got{};
  ibv_qp_init_attr got_init{};
  REQUIRE(ibv_query_qp(qp, &got, IBV_QP_STATE, &got_init) == 0);
  CHECK(got.qp_state == IBV_QPS_RTS);
  CHECK(got.dest_qp_num == qp->qp_num);
  CHECK(got_init.cap.max_inline_data == 256);

  // Posting checks: too many sges, inline too long, unsupported opcode.
  ibv_sge sges[3] = {};
  ibv_send_wr wr{};
  wr.sg_list = sges;
  wr.num_sge = 3;
  wr.opcode = IBV_WR_RDMA_WRITE;
  ibv_send_wr* bad = nullptr;
  CHECK(ibv_post_send(qp, &wr, &bad) == EINVAL);
  CHECK(bad == &wr);
  std::vector<char> big(257);
  ibv_sge one{reinterpret_cast<uintptr_t>(big.data()), 257, 0};
  wr.sg_list = &one;
  wr.num_sge = 1;
  wr.send_flags = IBV_SEND_INLINE;
  CHECK(ibv_post_send(qp, &wr, &bad) == EINVAL);
  wr.opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;
  wr.send_flags = 0;
  CHECK(ibv_post_send(qp, &wr, &bad) == EINVAL);

  attr.qp_state = IBV_QPS_ERR;
  REQUIRE(ibv_modify_qp(qp, &attr, IBV_QP_STATE) == 0);
  ibv_wc wc = poll_one(cq);  // the INIT-time receive is flushed
  CHECK(wc.status == IBV_WC_WR_FLUSH_ERR);
  attr.qp_state = IBV_QPS_RESET;
  REQUIRE(ibv_modify_qp(qp, &attr, IBV_QP_STATE) == 0);
  CHECK(ibv_destroy_qp(qp) == 0);
  CHECK(ibv_destroy_cq(cq) == 0);
}

// ================================================================= errors ==
TEST_CASE("softverbs: remote access errors, then flushes on both sides", "[softverbs]") {
  Dev dev;
  struct Case {
    const char* name;
    int mr_access;
    int qp_access;
    bool bad_rkey;
    size_t offset;
    ibv_wr_opcode op;
  };
  const int all = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
  const Case cases[] = {
      {"wrong rkey", all, all, true, 0, IBV_WR_RDMA_WRITE},
      {"out of bounds", all, all, false, 4000, IBV_WR_RDMA_WRITE},
      {"MR without remote write", IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ, all, false, 0,
       IBV_WR_RDMA_WRITE},
      {"QP without remote write", all, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ, false, 0,
       IBV_WR_RDMA_WRITE_WITH_IMM},
      {"MR without remote read", IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE, all, false, 0,
       IBV_WR_RDMA_READ},
  };
  for (const Case& c : cases) {
    INFO(c.name);
    Buf local(dev, 4096);
    Buf remote(dev, 4096, c.mr_access);
    QpOptions target;
    target.access = c.qp_access;
    Pair pair(dev, QpOptions{}, target);
    REQUIRE(post_recv(pair.b.qp, 50, nullptr, 0, 0) == 0);
    REQUIRE(post_recv(pair.b.qp, 51, nullptr, 0, 0) == 0);
    uint32_t rkey = c.bad_rkey ? remote.mr->rkey ^ 0x100 : remote.mr->rkey;
    for (uint64_t id = 1; id <= 3; ++id) {
      REQUIRE(post_rdma(pair.a.qp, id, c.op, local.ptr(), 200, local.mr->lkey,
                        remote.addr(c.offset), rkey) == 0);
    }
    auto wcs = poll_n(pair.a.cq, 3);
    REQUIRE(wcs.size() == 3);
    CHECK(wcs[0].wr_id == 1);
    CHECK(wcs[0].status == IBV_WC_REM_ACCESS_ERR);
    CHECK(wcs[1].status == IBV_WC_WR_FLUSH_ERR);
    CHECK(wcs[2].status == IBV_WC_WR_FLUSH_ERR);
    CHECK(wcs[2].wr_id == 3);
    CHECK(pair.a.state() == IBV_QPS_ERR);
    // The target QP went to error too: its receives flush.
    auto rwcs = poll_n(pair.b.cq, 2);
    REQUIRE(rwcs.size() == 2);
    CHECK(rwcs[0].status == IBV_WC_WR_FLUSH_ERR);
    CHECK(rwcs[0].wr_id == 50);
    CHECK(pair.b.state() == IBV_QPS_ERR);
    // ... and the responder got an access-error async event.
    ibv_async_event event{};
    REQUIRE(ibv_get_async_event(dev.ctx, &event) == 0);
    CHECK(event.event_type == IBV_EVENT_QP_ACCESS_ERR);
    CHECK(event.element.qp == pair.b.qp);
    ibv_ack_async_event(&event);
    // Later posts to a QP in error flush.
    REQUIRE(post_rdma(pair.a.qp, 9, IBV_WR_RDMA_WRITE, local.ptr(), 8, local.mr->lkey,
                      remote.addr(), remote.mr->rkey) == 0);
    CHECK(poll_one(pair.a.cq).status == IBV_WC_WR_FLUSH_ERR);
  }
}

TEST_CASE("softverbs: local protection errors", "[softverbs]") {
  Dev dev;
  Buf buf(dev, 4096);
  Buf readonly(dev, 4096, 0);  // no local write: cannot receive READ data
  Pair pair(dev);
  REQUIRE(post_rdma(pair.a.qp, 1, IBV_WR_RDMA_WRITE, buf.ptr(), 64, buf.mr->lkey, buf.addr(1024),
                    buf.mr->rkey) == 0);
  REQUIRE(post_rdma(pair.a.qp, 2, IBV_WR_RDMA_WRITE, buf.ptr(), 64, buf.mr->lkey + 1,
                    buf.addr(1024), buf.mr->rkey) == 0);
  REQUIRE(post_rdma(pair.a.qp, 3, IBV_WR_RDMA_WRITE, buf.ptr(), 64, buf.mr->lkey, buf.addr(1024),
                    buf.mr->rkey) == 0);
  auto wcs = poll_n(pair.a.cq, 3);
  REQUIRE(wcs.size() == 3);
  CHECK(wcs[0].status == IBV_WC_SUCCESS);
  CHECK(wcs[1].status == IBV_WC_LOC_PROT_ERR);
  CHECK(wcs[1].wr_id == 2);
  CHECK(wcs[2].status == IBV_WC_WR_FLUSH_ERR);

  Pair second(dev);
  REQUIRE(post_rdma(second.a.qp, 4, IBV_WR_RDMA_READ, readonly.ptr(), 64, readonly.mr->lkey,
                    buf.addr(), buf.mr->rkey) == 0);
  CHECK(poll_one(second.a.cq).status == IBV_WC_LOC_PROT_ERR);

  // Beyond the MR's end.
  Pair third(dev);
  REQUIRE(post_rdma(third.a.qp, 5, IBV_WR_RDMA_WRITE, buf.ptr(4000), 200, buf.mr->lkey, buf.addr(),
                    buf.mr->rkey) == 0);
  CHECK(poll_one(third.a.cq).status == IBV_WC_LOC_PROT_ERR);
}

TEST_CASE("softverbs: a send longer than the receive", "[softverbs]") {
  Dev dev;
  Buf buf(dev, 4096);
  Pair pair(dev);
  REQUIRE(post_recv(pair.b.qp, 7, buf.ptr(2048), 10, buf.mr->lkey) == 0);
  REQUIRE(post_rdma(pair.a.qp, 1, IBV_WR_SEND, buf.ptr(), 100, buf.mr->lkey, 0, 0) == 0);
  CHECK(poll_one(pair.a.cq).status == IBV_WC_REM_INV_REQ_ERR);
  ibv_wc wc = poll_one(pair.b.cq);
  CHECK(wc.wr_id == 7);
  CHECK(wc.status == IBV_WC_LOC_LEN_ERR);
}

TEST_CASE("softverbs: RNR NAKs, retries and giving up", "[softverbs]") {
  Dev dev;
  Buf buf(dev, 4096);
  {
    QpOptions requester;
    requester.rnr_retry = 2;
    Pair pair(dev, requester);
    softverbs_reset_counters();
    REQUIRE(post_rdma(pair.a.qp, 1, IBV_WR_SEND, buf.ptr(), 16, buf.mr->lkey, 0, 0) == 0);
    REQUIRE(post_rdma(pair.a.qp, 2, IBV_WR_SEND, buf.ptr(), 16, buf.mr->lkey, 0, 0) == 0);
    auto wcs = poll_n(pair.a.cq, 2);
    REQUIRE(wcs.size() == 2);
    CHECK(wcs[0].status == IBV_WC_RNR_RETRY_EXC_ERR);
    CHECK(wcs[1].status == IBV_WC_WR_FLUSH_ERR);
    CHECK(counters().rnr_naks_received == 3);  // the first try and two retries
    CHECK(counters().rnr_naks_sent == 3);
  }
  {
    QpOptions target;
    target.min_rnr_timer = 14;            // 1.28 ms
    Pair pair(dev, QpOptions{}, target);  // rnr_retry 7: forever
    fill(buf.ptr(), 64, 9);
    REQUIRE(post_rdma(pair.a.qp, 1, IBV_WR_SEND, buf.ptr(), 64, buf.mr->lkey, 0, 0) == 0);
    CHECK(quiet(pair.a.cq, 100));
    REQUIRE(post_recv(pair.b.qp, 2, buf.ptr(1024), 1024, buf.mr->lkey) == 0);
    CHECK(poll_one(pair.a.cq).status == IBV_WC_SUCCESS);
    ibv_wc wc = poll_one(pair.b.cq);
    CHECK(wc.status == IBV_WC_SUCCESS);
    CHECK(wc.byte_len == 64);
    CHECK(check(buf.ptr(1024), 64, 9));
  }
}

TEST_CASE("softverbs: send queue slots free only when a later completion is polled",
          "[softverbs]") {
  Dev dev;
  Buf buf(dev, 4096);
  QpOptions small;
  small.send_wr = 8;
  Pair pair(dev, small);
  for (int i = 0; i < 8; ++i) {
    REQUIRE(post_rdma(pair.a.qp, i, IBV_WR_RDMA_WRITE, buf.ptr(), 8, buf.mr->lkey, buf.addr(512),
                      buf.mr->rkey, 0) == 0);
  }
  usleep(50000);  // all executed and acknowledged, but nobody saw a completion
  CHECK(post_rdma(pair.a.qp, 8, IBV_WR_RDMA_WRITE, buf.ptr(), 8, buf.mr->lkey, buf.addr(512),
                  buf.mr->rkey) == ENOMEM);

  Pair other(dev, small);
  for (int i = 0; i < 7; ++i) {
    REQUIRE(post_rdma(other.a.qp, i, IBV_WR_RDMA_WRITE, buf.ptr(), 8, buf.mr->lkey, buf.addr(512),
                      buf.mr->rkey, 0) == 0);
  }
  REQUIRE(post_rdma(other.a.qp, 7, IBV_WR_RDMA_WRITE, buf.ptr(), 8, buf.mr->lkey, buf.addr(512),
                    buf.mr->rkey) == 0);
  CHECK(post_rdma(other.a.qp, 8, IBV_WR_RDMA_WRITE, buf.ptr(), 8, buf.mr->lkey, buf.addr(512),
                  buf.mr->rkey) == ENOMEM);
  CHECK(poll_one(other.a.cq).wr_id == 7);
  for (int i = 0; i < 8; ++i) {
    CHECK(post_rdma(other.a.qp, 10 + i, IBV_WR_RDMA_WRITE, buf.ptr(), 8, buf.mr->lkey,
                    buf.addr(512), buf.mr->rkey, i == 7 ? IBV_SEND_SIGNALED : 0) == 0);
  }
  CHECK(poll_one(other.a.cq).wr_id == 17);
}

TEST_CASE("softverbs: wrong address, QP number or PSN times out", "[softverbs]") {
  Dev dev;
  Buf buf(dev, 4096);
  Ep target(dev);
  auto expect_timeout = [&](Ep& ep) {
    auto start = Clock::now();
    REQUIRE(post_rdma(ep.qp, 1, IBV_WR_RDMA_WRITE, buf.ptr(), 8, buf.mr->lkey, buf.addr(),
                      buf.mr->rkey) == 0);
    REQUIRE(post_rdma(ep.qp, 2, IBV_WR_RDMA_WRITE, buf.ptr(), 8, buf.mr->lkey, buf.addr(),
                      buf.mr->rkey) == 0);
    auto wcs = poll_n(ep.cq, 2, 3000);
    REQUIRE(wcs.size() == 2);
    CHECK(wcs[0].status == IBV_WC_RETRY_EXC_ERR);
    CHECK(wcs[1].status == IBV_WC_WR_FLUSH_ERR);
    CHECK(Clock::now() - start >= std::chrono::milliseconds(90));  // SOFTVERBS_RETRY_MS=100
    CHECK(ep.state() == IBV_QPS_ERR);
  };
  {
    Ep ep(dev);
    Addr a = target.addr();
    a.gid.raw[15] ^= 1;  // nobody's GID
    ep.connect(a);
    expect_timeout(ep);
  }
  {
    Ep ep(dev);
    Addr a = target.addr();
    a.qpn = 0xfffff0;  // no such QP
    ep.connect(a);
    expect_timeout(ep);
  }
  {
    // The target is connected to someone else.
    Ep ep(dev);
    ep.connect(target.addr());
    expect_timeout(ep);
  }
  {
    QpOptions psn;
    psn.psn = 1000;
    Ep a(dev, psn);
    Ep b(dev);  // expects PSN 0
    a.connect(b.addr());
    b.connect(a.addr());
    expect_timeout(a);
  }
}

TEST_CASE("softverbs: a killed peer process fails WRs with RETRY_EXC_ERR", "[softverbs]") {
  Child child([](int fd) {
    Dev dev;
    Ep ep(dev);
    Buf target(dev, 4096);
    Addr me = ep.addr();
    me.addr = target.addr();
    me.rkey = target.mr->rkey;
    put(fd, me);
    ep.connect(get<Addr>(fd));
    put(fd, 'r');
    pause();
  });
  Dev dev;
  Ep ep(dev);
  Buf buf(dev, 4096);
  Addr peer = get<Addr>(child.fd());
  put(child.fd(), ep.addr());
  ep.connect(peer);
  REQUIRE(post_recv(ep.qp, 77, buf.ptr(), 64, buf.mr->lkey) == 0);
  REQUIRE(get<char>(child.fd()) == 'r');
  REQUIRE(post_rdma(ep.qp, 1, IBV_WR_RDMA_WRITE, buf.ptr(), 64, buf.mr->lkey, peer.addr,
                    peer.rkey) == 0);
  REQUIRE(poll_one(ep.cq).status == IBV_WC_SUCCESS);
  child.kill_now();
  auto start = Clock::now();
  REQUIRE(post_rdma(ep.qp, 2, IBV_WR_RDMA_WRITE, buf.ptr(), 64, buf.mr->lkey, peer.addr,
                    peer.rkey) == 0);
  REQUIRE(post_rdma(ep.qp, 3, IBV_WR_RDMA_WRITE, buf.ptr(), 64, buf.mr->lkey, peer.addr,
                    peer.rkey) == 0);
  auto wcs = poll_n(ep.cq, 3, 3000);
  REQUIRE(wcs.size() == 3);
  CHECK(wcs[0].wr_id == 2);
  CHECK(wcs[0].status == IBV_WC_RETRY_EXC_ERR);
  CHECK(wcs[1].status == IBV_WC_WR_FLUSH_ERR);
  CHECK(wcs[2].wr_id == 77);  // the receive flushes once the QP is in error
  CHECK(wcs[2].status == IBV_WC_WR_FLUSH_ERR);
  CHECK(Clock::now() - start < std::chrono::seconds(2));
}

// ================================================================== faults ==
TEST_CASE("softverbs: SOFTVERBS_FAULT_WC_ERROR", "[softverbs]") {
  for (const auto& [spec, status] :
       {std::pair<const char*, ibv_wc_status>{"3:rem_access", IBV_WC_REM_ACCESS_ERR},
        {"3", IBV_WC_GENERAL_ERR},
        {"3:12", IBV_WC_RETRY_EXC_ERR}}) {
    INFO(spec);
    ScopedEnv env{{"SOFTVERBS_FAULT_WC_ERROR", spec}};
    Dev dev;
    Buf buf(dev, 4096);
    Pair pair(dev);
    for (int i = 1; i <= 5; ++i) {
      REQUIRE(post_rdma(pair.a.qp, i, IBV_WR_RDMA_WRITE, buf.ptr(), 8, buf.mr->lkey, buf.addr(1024),
                        buf.mr->rkey) == 0);
    }
    auto wcs = poll_n(pair.a.cq, 5);
    REQUIRE(wcs.size() == 5);
    CHECK(wcs[0].status == IBV_WC_SUCCESS);
    CHECK(wcs[1].status == IBV_WC_SUCCESS);
    CHECK(wcs[2].status == status);
    CHECK(wcs[2].wr_id == 3);
    CHECK(wcs[3].status == IBV_WC_WR_FLUSH_ERR);
    CHECK(wcs[4].status == IBV_WC_WR_FLUSH_ERR);
  }
}

TEST_CASE("softverbs: SOFTVERBS_FAULT_RNR", "[softverbs]") {
  ScopedEnv env{{"SOFTVERBS_FAULT_RNR", "2"}};
  Dev dev;
  Buf buf(dev, 4096);
  softverbs_reset_counters();
  {
    QpOptions requester;
    requester.rnr_retry = 1;
    Pair pair(dev, requester);
    REQUIRE(post_recv(pair.b.qp, 1, nullptr, 0, 0) == 0);
    REQUIRE(post_rdma(pair.a.qp, 1, IBV_WR_RDMA_WRITE_WITH_IMM, nullptr, 0, 0, 0, 0) == 0);
    CHECK(poll_one(pair.a.cq).status == IBV_WC_RNR_RETRY_EXC_ERR);  // two forced NAKs
  }
  {
    Pair pair(dev);  // the fault is used up: goes straight through
    REQUIRE(post_recv(pair.b.qp, 1, nullptr, 0, 0) == 0);
    REQUIRE(post_rdma(pair.a.qp, 1, IBV_WR_RDMA_WRITE_WITH_IMM, nullptr, 0, 0, 0, 0) == 0);
    CHECK(poll_one(pair.a.cq).status == IBV_WC_SUCCESS);
  }
  CHECK(counters().rnr_naks_sent == 2);
}

TEST_CASE("softverbs: SOFTVERBS_FAULT_RNR with rnr_retry 7 succeeds", "[softverbs]") {
  ScopedEnv env{{"SOFTVERBS_FAULT_RNR", "3"}};
  Dev dev;
  Buf buf(dev, 4096);
  Pair pair(dev);
  REQUIRE(post_recv(pair.b.qp, 1, buf.ptr(), 64, buf.mr->lkey) == 0);
  REQUIRE(post_rdma(pair.a.qp, 1, IBV_WR_SEND, buf.ptr(100), 10, buf.mr->lkey, 0, 0) == 0);
  CHECK(poll_one(pair.a.cq).status == IBV_WC_SUCCESS);
  CHECK(poll_one(pair.b.cq).status == IBV_WC_SUCCESS);
}

TEST_CASE("softverbs: SOFTVERBS_FAULT_LINK_DOWN breaks both sides", "[softverbs]") {
  Child child([](int fd) {
    unsetenv("SOFTVERBS_FAULT_LINK_DOWN");
    Dev dev;
    Ep ep(dev);
    Buf target(dev, 4096);
    Addr me = ep.addr();
    me.addr = target.addr();
    me.rkey = target.mr->rkey;
    put(fd, me);
    Addr peer = get<Addr>(fd);
    ep.connect(peer);
    put(fd, 'r');
    ENSURE(get<char>(fd, 10000) == 'd');  // the peer's link is down
    ENSURE(post_rdma(ep.qp, 1, IBV_WR_RDMA_WRITE, target.ptr(), 8, target.mr->lkey, peer.addr,
                     peer.rkey) == 0);
    ibv_wc wc = poll_one(ep.cq, 3000);
    ENSURE(wc.status == IBV_WC_RETRY_EXC_ERR);
    put(fd, 'k');
  });
  ScopedEnv env{{"SOFTVERBS_FAULT_LINK_DOWN", "2"}};
  Dev dev;
  Ep ep(dev);
  Buf buf(dev, 4096);
  Addr peer = get<Addr>(child.fd());
  Addr me = ep.addr();
  me.addr = buf.addr();
  me.rkey = buf.mr->rkey;
  put(child.fd(), me);
  ep.connect(peer);
  REQUIRE(get<char>(child.fd()) == 'r');
  for (int i = 1; i <= 2; ++i) {
    REQUIRE(post_rdma(ep.qp, i, IBV_WR_RDMA_WRITE, buf.ptr(), 8, buf.mr->lkey, peer.addr,
                      peer.rkey) == 0);
    REQUIRE(poll_one(ep.cq).status == IBV_WC_SUCCESS);
  }
  auto start = Clock::now();
  REQUIRE(post_rdma(ep.qp, 3, IBV_WR_RDMA_WRITE, buf.ptr(), 8, buf.mr->lkey, peer.addr,
                    peer.rkey) == 0);
  ibv_wc wc = poll_one(ep.cq, 3000);
  CHECK(wc.wr_id == 3);
  CHECK(wc.status == IBV_WC_RETRY_EXC_ERR);
  CHECK(Clock::now() - start >= std::chrono::milliseconds(90));
  put(child.fd(), 'd');
  REQUIRE(get<char>(child.fd()) == 'k');
  REQUIRE(child.wait() == 0);
}

TEST_CASE("softverbs: SOFTVERBS_FAULT_PORT_DOWN_MS raises PORT_ERR on async_fd", "[softverbs]") {
  ScopedEnv env{{"SOFTVERBS_FAULT_PORT_DOWN_MS", "150"}};
  Dev dev;
  Buf buf(dev, 4096);
  Pair pair(dev);
  REQUIRE(post_rdma(pair.a.qp, 1, IBV_WR_RDMA_WRITE, buf.ptr(), 8, buf.mr->lkey, buf.addr(64),
                    buf.mr->rkey) == 0);
  CHECK(poll_one(pair.a.cq).status == IBV_WC_SUCCESS);
  pollfd pfd{dev.ctx->async_fd, POLLIN, 0};
  REQUIRE(poll(&pfd, 1, 0) == 0);
  REQUIRE(poll(&pfd, 1, 3000) == 1);
  ibv_async_event event{};
  REQUIRE(ibv_get_async_event(dev.ctx, &event) == 0);
  CHECK(event.event_type == IBV_EVENT_PORT_ERR);
  CHECK(event.element.port_num == 1);
  ibv_ack_async_event(&event);
  CHECK(poll(&pfd, 1, 0) == 0);
  ibv_port_attr port{};
  REQUIRE(ibv_query_port(dev.ctx, 1, &port) == 0);
  CHECK(port.state == IBV_PORT_DOWN);
  CHECK(read_file(std::string(dev.ctx->device->ibdev_path) + "/ports/1/state") == "1: DOWN\n");
  REQUIRE(post_rdma(pair.a.qp, 2, IBV_WR_RDMA_WRITE, buf.ptr(), 8, buf.mr->lkey, buf.addr(64),
                    buf.mr->rkey) == 0);
  CHECK(poll_one(pair.a.cq, 3000).status == IBV_WC_RETRY_EXC_ERR);
}

TEST_CASE("softverbs: SOFTVERBS_REORDER shuffles QPs sharing a CQ, never within one",
          "[softverbs]") {
  ScopedEnv env{{"SOFTVERBS_REORDER", "16"}, {"SOFTVERBS_REORDER_SEED", "5"}};
  Dev dev;
  Buf buf(dev, 4096);
  ibv_cq* cq = ibv_create_cq(dev.ctx, 1024, nullptr, nullptr, 0);
  std::vector<std::unique_ptr<Ep>> senders;
  std::vector<std::unique_ptr<Ep>> targets;
  for (int q = 0; q < 4; ++q) {
    senders.push_back(std::make_unique<Ep>(dev, QpOptions{}, cq));
    targets.push_back(std::make_unique<Ep>(dev));
    senders[q]->connect(targets[q]->addr());
    targets[q]->connect(senders[q]->addr());
  }
  for (int i = 0; i < 50; ++i) {
    for (int q = 0; q < 4; ++q) {
      REQUIRE(post_rdma(senders[q]->qp, static_cast<uint64_t>(q) * 1000 + i, IBV_WR_RDMA_WRITE,
                        buf.ptr(), 8, buf.mr->lkey, buf.addr(64), buf.mr->rkey) == 0);
    }
  }
  usleep(300000);  // let everything complete, then poll it in one go
  auto wcs = poll_n(cq, 200);
  REQUIRE(wcs.size() == 200);
  std::map<uint64_t, int64_t> last;
  int out_of_posting_order = 0;
  for (size_t i = 0; i < wcs.size(); ++i) {
    CHECK(wcs[i].status == IBV_WC_SUCCESS);
    uint64_t q = wcs[i].wr_id / 1000;
    int64_t seq = static_cast<int64_t>(wcs[i].wr_id % 1000);
    auto it = last.find(q);
    if (it != last.end()) CHECK(seq == it->second + 1);
    last[q] = seq;
    if (i > 0) {
      uint64_t prev = wcs[i - 1].wr_id;
      if ((prev % 1000) * 4 + prev / 1000 > (wcs[i].wr_id % 1000) * 4 + q) ++out_of_posting_order;
    }
  }
  CHECK(out_of_posting_order > 0);
  senders.clear();
  targets.clear();
  ibv_destroy_cq(cq);
}

// ================================================================== memory ==
TEST_CASE("softverbs: ECE is unsupported by default, negotiated before RTR when offered",
          "[softverbs]") {
  Dev dev;
  {
    Ep plain(dev);
    ibv_ece ece{};
    CHECK(ibv_query_ece(plain.qp, &ece) == EOPNOTSUPP);
    ece.vendor_id = SOFTVERBS_ECE_VENDOR_ID;
    CHECK(ibv_set_ece(plain.qp, &ece) == EOPNOTSUPP);
  }
  ScopedEnv env{{"SOFTVERBS_ECE", "0x6"}};
  Ep a(dev), b(dev);
  ibv_ece ece{};
  REQUIRE(ibv_query_ece(a.qp, &ece) == 0);
  CHECK(ece.vendor_id == SOFTVERBS_ECE_VENDOR_ID);
  CHECK(ece.options == 0x6);
  CHECK(ece.comp_mask == 0);
  softverbs_reset_counters();
  ibv_ece wrong = ece;
  wrong.vendor_id = 0x15b3;
  CHECK(ibv_set_ece(b.qp, &wrong) == EINVAL);
  wrong = ece;
  wrong.options = 0x1;  // not offered
  CHECK(ibv_set_ece(b.qp, &wrong) == EINVAL);
  ibv_ece subset = ece;
  subset.options = 0x2;
  REQUIRE(ibv_set_ece(b.qp, &subset) == 0);
  REQUIRE(ibv_query_ece(b.qp, &ece) == 0);
  CHECK(ece.options == 0x2);
  CHECK(counters().ece_set == 1);
  REQUIRE(a.init() == 0);
  REQUIRE(b.init() == 0);
  REQUIRE(a.rtr(b.addr()) == 0);
  CHECK(ibv_set_ece(a.qp, &subset) == EINVAL);  // after RTR: too late
  CHECK(counters().ece_set == 1);
}

TEST_CASE("softverbs: dma-buf MRs reach the exporter's pages", "[softverbs]") {
  Dev dev;
  {
    errno = 0;
    CHECK(ibv_reg_dmabuf_mr(dev.pd, 0, 0, 0, -1, 0) == nullptr);
    CHECK(errno == EBADF);  // NCCL's probe: supported
  }
  int fd = memfd_create("softverbs-test", MFD_CLOEXEC);
  REQUIRE(fd >= 0);
  REQUIRE(ftruncate(fd, 65536) == 0);
  char* view = static_cast<char*>(mmap(nullptr, 65536, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0));
  REQUIRE(view != MAP_FAILED);
  {
    ScopedEnv env{{"SOFTVERBS_DMABUF", "0"}};
    errno = 0;
    CHECK(ibv_reg_dmabuf_mr(dev.pd, 0, 4096, 0, fd, IBV_ACCESS_LOCAL_WRITE) == nullptr);
    CHECK(errno == EOPNOTSUPP);
  }
  const uint64_t iova = 0x7000000000ULL;
  ibv_mr* mr =
      ibv_reg_dmabuf_mr(dev.pd, 4096 + 512, 8192, iova, fd,
                        IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
  REQUIRE(mr != nullptr);
  close(fd);  // the registration keeps the pages
  Buf buf(dev, 8192);
  Pair pair(dev);
  fill(buf.ptr(), 1000, 21);
  REQUIRE(post_rdma(pair.a.qp, 1, IBV_WR_RDMA_WRITE, buf.ptr(), 1000, buf.mr->lkey, iova + 100,
                    mr->rkey) == 0);
  CHECK(poll_one(pair.a.cq).status == IBV_WC_SUCCESS);
  CHECK(check(view + 4096 + 512 + 100, 1000, 21));
  fill(view + 4096 + 512 + 4000, 500, 22);
  REQUIRE(post_rdma(pair.a.qp, 2, IBV_WR_RDMA_READ, buf.ptr(4096), 500, buf.mr->lkey, iova + 4000,
                    mr->rkey) == 0);
  CHECK(poll_one(pair.a.cq).status == IBV_WC_SUCCESS);
  CHECK(check(buf.ptr(4096), 500, 22));
  // As a local source too, addressed in iova space.
  fill(view + 4096 + 512, 64, 23);
  REQUIRE(post_rdma(pair.a.qp, 3, IBV_WR_RDMA_WRITE, reinterpret_cast<void*>(iova), 64, mr->lkey,
                    buf.addr(6000), buf.mr->rkey) == 0);
  CHECK(poll_one(pair.a.cq).status == IBV_WC_SUCCESS);
  CHECK(check(buf.ptr(6000), 64, 23));
  // Past the registered 8 KiB.
  REQUIRE(post_rdma(pair.a.qp, 4, IBV_WR_RDMA_WRITE, buf.ptr(), 100, buf.mr->lkey, iova + 8150,
                    mr->rkey) == 0);
  CHECK(poll_one(pair.a.cq).status == IBV_WC_REM_ACCESS_ERR);
  CHECK(ibv_dereg_mr(mr) == 0);
  munmap(view, 65536);
}

TEST_CASE("softverbs: reg_mr_iova2 addresses the region by its iova", "[softverbs]") {
  Dev dev;
  std::vector<char> mem(4096);
  const uint64_t iova = 0x123400000ULL;
  ibv_mr* mr = ibv_reg_mr_iova2(dev.pd, mem.data(), mem.size(), iova,
                                IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  REQUIRE(mr != nullptr);
  CHECK(mr->lkey != mr->rkey);
  Buf buf(dev, 4096);
  Pair pair(dev);
  fill(buf.ptr(), 128, 31);
  REQUIRE(post_rdma(pair.a.qp, 1, IBV_WR_RDMA_WRITE, buf.ptr(), 128, buf.mr->lkey, iova + 10,
                    mr->rkey) == 0);
  CHECK(poll_one(pair.a.cq).status == IBV_WC_SUCCESS);
  CHECK(check(mem.data() + 10, 128, 31));
  // The virtual address is not in the MR's address space.
  REQUIRE(post_rdma(pair.a.qp, 2, IBV_WR_RDMA_WRITE, buf.ptr(), 128, buf.mr->lkey,
                    reinterpret_cast<uintptr_t>(mem.data()), mr->rkey) == 0);
  CHECK(poll_one(pair.a.cq).status == IBV_WC_REM_ACCESS_ERR);
  CHECK(ibv_dereg_mr(mr) == 0);
  errno = 0;
  CHECK(ibv_reg_mr(dev.pd, mem.data(), mem.size(), IBV_ACCESS_REMOTE_WRITE) == nullptr);
  CHECK(errno == EINVAL);  // remote write needs local write
}

// ============================================================== lifecycle ==
TEST_CASE("softverbs: counters and the counters file", "[softverbs]") {
  char path[] = "/tmp/softverbs-counters-XXXXXX";
  int tmp = mkstemp(path);
  REQUIRE(tmp >= 0);
  close(tmp);
  ScopedEnv env{{"SOFTVERBS_COUNTERS_FILE", path}};
  {
    Dev dev;
    Buf buf(dev, 1 << 16);
    Pair pair(dev);
    REQUIRE(post_recv(pair.b.qp, 4, buf.ptr(8192), 100, buf.mr->lkey) == 0);  // no RNR
    softverbs_reset_counters();
    REQUIRE(post_recv(pair.b.qp, 5, buf.ptr(8192), 100, buf.mr->lkey) == 0);  // stays posted
    ibv_sge sge{buf.addr(), 1000, buf.mr->lkey};
    ibv_send_wr wrs[2] = {};
    wrs[0].wr_id = 1;
    wrs[0].next = &wrs[1];
    wrs[0].sg_list = &sge;
    wrs[0].num_sge = 1;
    wrs[0].opcode = IBV_WR_RDMA_WRITE;
    wrs[0].wr.rdma.remote_addr = buf.addr(4096);
    wrs[0].wr.rdma.rkey = buf.mr->rkey;
    wrs[1] = wrs[0];
    wrs[1].next = nullptr;
    wrs[1].wr_id = 2;
    wrs[1].opcode = IBV_WR_RDMA_READ;
    wrs[1].send_flags = IBV_SEND_SIGNALED;
    ibv_send_wr* bad = nullptr;
    REQUIRE(ibv_post_send(pair.a.qp, wrs, &bad) == 0);
    REQUIRE(post_rdma(pair.a.qp, 3, IBV_WR_SEND, buf.ptr(), 10, 0, 0, 0,
                      IBV_SEND_SIGNALED | IBV_SEND_INLINE) == 0);
    REQUIRE(poll_n(pair.a.cq, 2).size() == 2);
    REQUIRE(poll_n(pair.b.cq, 1).size() == 1);
    softverbs_counters c = counters();
    CHECK(c.doorbells == 2);
    CHECK(c.send_wrs == 3);
    CHECK(c.send_wrs_write == 1);
    CHECK(c.send_wrs_read == 1);
    CHECK(c.send_wrs_send == 1);
    CHECK(c.inline_wrs == 1);
    CHECK(c.signaled_wrs == 2);
    CHECK(c.recv_posts == 1);
    CHECK(c.recv_wrs == 1);
    CHECK(c.rnr_naks_sent == 0);
    CHECK(c.completions == 3);
    CHECK(c.poll_calls >= 2);
    CHECK(c.bytes_written == 1000);
    CHECK(c.bytes_read == 1000);
    CHECK(c.bytes_sent == 10);
    CHECK(c.packets_sent == 6);  // three requests, three responses (loopback)
    CHECK(c.packets_received == 6);
    CHECK(c.error_completions == 0);
  }
  std::string text = read_file(path);
  unlink(path);
  CHECK(text.find("{\"pid\":" + std::to_string(getpid()) + ",\"doorbells\":2,") == 0);
  CHECK(text.find("\"packets_sent\":6") != std::string::npos);
  CHECK(std::count(text.begin(), text.end(), '\n') == 1);
}

namespace {

std::string registry_path() {
  return std::getenv("SOFTVERBS_DIR") != nullptr ? std::getenv("SOFTVERBS_DIR")
                                                 : "/tmp/softverbs-" + std::to_string(getuid());
}

std::string link_target(const std::string& path) {
  char target[4096];
  ssize_t n = readlink(path.c_str(), target, sizeof(target) - 1);
  return n < 0 ? std::string() : std::string(target, static_cast<size_t>(n));
}

pid_t dead_pid() {
  pid_t pid = fork();
  if (pid == 0) _exit(0);
  waitpid(pid, nullptr, 0);
  return pid;
}

}  // namespace

TEST_CASE("softverbs: QP entries link to one description per NIC and device; dead ones go",
          "[softverbs]") {
  const std::string dir = registry_path();
  {
    Dev dev;
    Ep a(dev);
    Ep b(dev);
    const std::string qp_a = dir + "/qp-" + std::to_string(a.qp->qp_num);
    const std::string qp_b = dir + "/qp-" + std::to_string(b.qp->qp_num);
    const std::string target = link_target(qp_a);
    REQUIRE_FALSE(target.empty());
    CHECK(link_target(qp_b) == target);  // written once, shared
    CHECK(target.rfind("nic-" + std::to_string(getpid()) + "-", 0) == 0);
    CHECK(read_file(dir + "/" + target).rfind("pid " + std::to_string(getpid()) + "\n", 0) == 0);
  }
  // Left by processes that died without closing: a link to a description
  // that is gone, a plain file of the older layout, and one description.
  const pid_t dead = dead_pid();
  const std::string dead_nic = "nic-" + std::to_string(dead) + "-0-0.sock";
  const std::string stale_link = dir + "/qp-16777000";
  const std::string stale_file = dir + "/qp-16777001";
  const std::string live_link = dir + "/qp-16777002";
  REQUIRE(symlink((dead_nic + ".info-0").c_str(), stale_link.c_str()) == 0);
  {
    std::ofstream(stale_file) << "pid " << dead << "\nnic " << dir << "/" << dead_nic
                              << "\nlink eth\n";
    std::ofstream(dir + "/" + dead_nic + ".info-1") << "pid " << dead << "\n";
  }
  // A live owner's entry stays, even while its description is not there.
  const std::string mine = "nic-" + std::to_string(getpid()) + "-0-999.sock.info-0";
  REQUIRE(symlink(mine.c_str(), live_link.c_str()) == 0);
  {
    Dev dev;  // a NIC starting reclaims what dead processes left
    Ep a(dev);
    CHECK(access(stale_file.c_str(), F_OK) != 0);
    CHECK(link_target(stale_link).empty());
    CHECK(access((dir + "/" + dead_nic + ".info-1").c_str(), F_OK) != 0);
    CHECK(link_target(live_link) == mine);
  }
  unlink(live_link.c_str());
}

TEST_CASE("softverbs: no thread, fd or registry file left after the last close", "[softverbs]") {
  // The earlier cases' NIC threads gone: the test runs on its main thread.
  long threads = settled_threads(1);
  long fds = count_dir("/proc/self/fd");
  std::string dir = std::getenv("SOFTVERBS_DIR") != nullptr
                        ? std::getenv("SOFTVERBS_DIR")
                        : "/tmp/softverbs-" + std::to_string(getuid());
  {
    Dev dev;
    Dev second;
    ibv_comp_channel* channel = ibv_create_comp_channel(dev.ctx);
    REQUIRE(channel != nullptr);
    Buf buf(dev, 4096);
    Pair pair(dev);
    REQUIRE(post_rdma(pair.a.qp, 1, IBV_WR_RDMA_WRITE, buf.ptr(), 8, buf.mr->lkey, buf.addr(64),
                      buf.mr->rkey) == 0);
    REQUIRE(poll_one(pair.a.cq).status == IBV_WC_SUCCESS);
    CHECK(count_dir("/proc/self/task") == threads + 1);  // one NIC thread per process
    CHECK(access((dir + "/qp-" + std::to_string(pair.a.qp->qp_num)).c_str(), F_OK) == 0);
    REQUIRE(ibv_destroy_comp_channel(channel) == 0);
  }
  CHECK(settled_threads(threads) == threads);
  CHECK(count_dir("/proc/self/fd") == fds);
  DIR* d = opendir(dir.c_str());
  REQUIRE(d != nullptr);
  std::string mine = "nic-" + std::to_string(getpid()) + "-";
  while (dirent* e = readdir(d)) {
    CHECK(std::string(e->d_name).rfind(mine, 0) != 0);
  }
  closedir(d);
}

TEST_CASE("softverbs: completion channel events", "[softverbs]") {
  Dev dev;
  ibv_comp_channel* channel = ibv_create_comp_channel(dev.ctx);
  REQUIRE(channel != nullptr);
  ibv_cq* cq = ibv_create_cq(dev.ctx, 64, &dev, channel, 0);
  REQUIRE(cq != nullptr);
  Buf buf(dev, 4096);
  {
    Ep a(dev, QpOptions{}, cq);
    Ep b(dev);
    a.connect(b.addr());
    b.connect(a.addr());
    REQUIRE(ibv_req_notify_cq(cq, 0) == 0);
    REQUIRE(post_rdma(a.qp, 1, IBV_WR_RDMA_WRITE, buf.ptr(), 8, buf.mr->lkey, buf.addr(64),
                      buf.mr->rkey) == 0);
    pollfd pfd{channel->fd, POLLIN, 0};
    REQUIRE(poll(&pfd, 1, 3000) == 1);
    ibv_cq* ev_cq = nullptr;
    void* ev_ctx = nullptr;
    REQUIRE(ibv_get_cq_event(channel, &ev_cq, &ev_ctx) == 0);
    CHECK(ev_cq == cq);
    CHECK(ev_ctx == &dev);
    ibv_ack_cq_events(cq, 1);
    CHECK(poll_one(cq).status == IBV_WC_SUCCESS);
  }
  CHECK(ibv_destroy_comp_channel(channel) == EBUSY);
  REQUIRE(ibv_destroy_cq(cq) == 0);
  REQUIRE(ibv_destroy_comp_channel(channel) == 0);
}

namespace {

// LeakSanitizer ignores what is allocated while this lives (ASan builds).
struct LeakChecksOff {
#if defined(__SANITIZE_ADDRESS__)
  LeakChecksOff() {
    __lsan_disable();
  }
  ~LeakChecksOff() {
    __lsan_enable();
  }
#endif
};

}  // namespace

TEST_CASE("softverbs: a dlopen'ed copy stops its NIC at dlclose", "[softverbs]") {
  // A second copy of the library (another file, so its own state), loaded
  // and unloaded the way the transport does, with and without closing first.
  char dir[] = "/tmp/softverbs-copy-XXXXXX";
  REQUIRE(mkdtemp(dir) != nullptr);
  std::string copy = std::string(dir) + "/libibverbs.so.1";
  {
    std::ifstream in(SOFTVERBS_LIB, std::ios::binary);
    std::ofstream out(copy, std::ios::binary);
    out << in.rdbuf();
  }
  long threads = count_dir("/proc/self/task");
  long fds = count_dir("/proc/self/fd");
  for (bool close_first : {true, false}) {
    INFO("close before dlclose: " << close_first);
    // What the unloaded copy allocated (and, with close_first false, the
    // device left open on purpose) cannot be freed after dlclose.
    [[maybe_unused]] LeakChecksOff leaks_off;
    void* lib = dlopen(copy.c_str(), RTLD_NOW | RTLD_LOCAL);
    REQUIRE(lib != nullptr);
    auto present = reinterpret_cast<int (*)()>(dlsym(lib, "softverbs_present"));
    auto get_list =
        reinterpret_cast<decltype(&ibv_get_device_list)>(dlsym(lib, "ibv_get_device_list"));
    auto free_list =
        reinterpret_cast<decltype(&ibv_free_device_list)>(dlsym(lib, "ibv_free_device_list"));
    auto open = reinterpret_cast<decltype(&ibv_open_device)>(dlsym(lib, "ibv_open_device"));
    auto close_device =
        reinterpret_cast<decltype(&ibv_close_device)>(dlsym(lib, "ibv_close_device"));
    REQUIRE(present != nullptr);
    REQUIRE(present != &softverbs_present);  // really another copy
    REQUIRE((get_list != nullptr && free_list != nullptr && open != nullptr &&
             close_device != nullptr));
    int n = 0;
    ibv_device** list = get_list(&n);
    REQUIRE(n >= 1);
    ibv_context* ctx = open(list[0]);
    free_list(list);
    REQUIRE(ctx != nullptr);
    CHECK(count_dir("/proc/self/task") == threads + 1);
    if (close_first) CHECK(close_device(ctx) == 0);
    REQUIRE(dlclose(lib) == 0);
    CHECK(count_dir("/proc/self/task") == threads);
    CHECK(count_dir("/proc/self/fd") == fds);
  }
  unlink(copy.c_str());
  rmdir(dir);
}

TEST_CASE("softverbs: gather and scatter over several sges", "[softverbs]") {
  Dev dev;
  Buf a(dev, 8192);
  Buf b(dev, 8192);
  Pair pair(dev);
  fill(a.ptr(0), 100, 41);
  fill(b.ptr(0), 300, 42);
  // Receive into three pieces of two regions.
  ibv_sge rsg[3] = {{a.addr(4096), 50, a.mr->lkey},
                    {b.addr(4096), 200, b.mr->lkey},
                    {a.addr(6000), 1000, a.mr->lkey}};
  ibv_recv_wr rwr{};
  rwr.wr_id = 5;
  rwr.sg_list = rsg;
  rwr.num_sge = 3;
  ibv_recv_wr* rbad = nullptr;
  REQUIRE(ibv_post_recv(pair.b.qp, &rwr, &rbad) == 0);
  ibv_sge ssg[2] = {{a.addr(0), 100, a.mr->lkey}, {b.addr(0), 300, b.mr->lkey}};
  ibv_send_wr swr{};
  swr.wr_id = 6;
  swr.sg_list = ssg;
  swr.num_sge = 2;
  swr.opcode = IBV_WR_SEND;
  swr.send_flags = IBV_SEND_SIGNALED;
  ibv_send_wr* sbad = nullptr;
  REQUIRE(ibv_post_send(pair.a.qp, &swr, &sbad) == 0);
  CHECK(poll_one(pair.a.cq).status == IBV_WC_SUCCESS);
  ibv_wc wc = poll_one(pair.b.cq);
  REQUIRE(wc.status == IBV_WC_SUCCESS);
  CHECK(wc.byte_len == 400);
  CHECK(wc.src_qp == pair.a.qp->qp_num);
  std::vector<char> sent(400);
  std::memcpy(sent.data(), a.ptr(0), 100);
  std::memcpy(sent.data() + 100, b.ptr(0), 300);
  std::vector<char> got(400);
  std::memcpy(got.data(), a.ptr(4096), 50);
  std::memcpy(got.data() + 50, b.ptr(4096), 200);
  std::memcpy(got.data() + 250, a.ptr(6000), 150);
  CHECK(got == sent);
  // An RDMA write gathered from two regions.
  swr.opcode = IBV_WR_RDMA_WRITE;
  swr.wr.rdma.remote_addr = b.addr(7000);
  swr.wr.rdma.rkey = b.mr->rkey;
  REQUIRE(ibv_post_send(pair.a.qp, &swr, &sbad) == 0);
  CHECK(poll_one(pair.a.cq).status == IBV_WC_SUCCESS);
  CHECK(std::memcmp(b.ptr(7000), sent.data(), 400) == 0);
}

TEST_CASE("softverbs: deregistering memory of a WR in flight is allowed", "[softverbs]") {
  Dev dev;
  std::vector<char> src(8 << 20);
  std::vector<char> dst(8 << 20);
  fill(src.data(), src.size(), 51);
  ibv_mr* smr = ibv_reg_mr(dev.pd, src.data(), src.size(), IBV_ACCESS_LOCAL_WRITE);
  ibv_mr* dmr =
      ibv_reg_mr(dev.pd, dst.data(), dst.size(), IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  REQUIRE((smr != nullptr && dmr != nullptr));
  Pair pair(dev);
  REQUIRE(post_rdma(pair.a.qp, 1, IBV_WR_RDMA_WRITE, src.data(), static_cast<uint32_t>(src.size()),
                    smr->lkey, reinterpret_cast<uintptr_t>(dst.data()), dmr->rkey) == 0);
  CHECK(ibv_dereg_mr(smr) == 0);  // the WR's own (local) region
  ibv_wc wc = poll_one(pair.a.cq);
  CHECK(wc.status == IBV_WC_SUCCESS);
  CHECK(check(dst.data(), dst.size(), 51));
  // A deregistered target region is gone for the next write.
  uint32_t rkey = dmr->rkey;
  CHECK(ibv_dereg_mr(dmr) == 0);
  REQUIRE(post_rdma(pair.a.qp, 2, IBV_WR_RDMA_WRITE, dst.data(), 8, 0,
                    reinterpret_cast<uintptr_t>(dst.data()), rkey,
                    IBV_SEND_SIGNALED | IBV_SEND_INLINE) == 0);
  CHECK(poll_one(pair.a.cq).status == IBV_WC_REM_ACCESS_ERR);
}

TEST_CASE("softverbs: CQ overflow raises IBV_EVENT_CQ_ERR", "[softverbs]") {
  Dev dev;
  Buf buf(dev, 4096);
  ibv_cq* small = ibv_create_cq(dev.ctx, 4, nullptr, nullptr, 0);
  REQUIRE(small != nullptr);
  {
    Ep a(dev, QpOptions{}, small);
    Ep b(dev);
    a.connect(b.addr());
    b.connect(a.addr());
    for (int i = 0; i < 6; ++i) {
      REQUIRE(post_rdma(a.qp, i, IBV_WR_RDMA_WRITE, buf.ptr(), 8, buf.mr->lkey, buf.addr(64),
                        buf.mr->rkey) == 0);
    }
    pollfd pfd{dev.ctx->async_fd, POLLIN, 0};
    REQUIRE(poll(&pfd, 1, 3000) == 1);
    ibv_async_event event{};
    REQUIRE(ibv_get_async_event(dev.ctx, &event) == 0);
    CHECK(event.event_type == IBV_EVENT_CQ_ERR);
    CHECK(event.element.cq == small);
    ibv_ack_async_event(&event);
    CHECK(poll_n(small, 6).size() == 6);
  }
  REQUIRE(ibv_destroy_cq(small) == 0);
}

TEST_CASE("softverbs: processes in different network namespaces", "[softverbs]") {
  // The peer gets a network namespace of its own (root only): its lo is down
  // and has no address, so only the link-local GIDs exist there, and the
  // traffic still flows over the registry's Unix sockets.
  Child child([](int fd) {
    if (unshare(CLONE_NEWNET) != 0) {
      put(fd, Addr{});  // qpn 0: not permitted here
      return;
    }
    Dev dev;
    ibv_gid_entry e{};
    ENSURE(ibv_query_gid_ex(dev.ctx, 1, 2, &e, 0) == ENODATA);  // no IPv4 in here
    QpOptions opt;
    opt.gid_index = 1;  // fe80::<guid> RoCE v2
    Ep ep(dev, opt);
    Buf target(dev, 65536);
    Addr me = ep.addr();
    me.addr = target.addr();
    me.rkey = target.mr->rkey;
    put(fd, me);
    ep.connect(get<Addr>(fd));
    ENSURE(post_recv(ep.qp, 1, nullptr, 0, 0) == 0);
    put(fd, 'r');
    ibv_wc wc = poll_one(ep.cq, 10000);
    ENSURE(wc.status == IBV_WC_SUCCESS);
    ENSURE(check(target.ptr(), 65536, 61));
    put(fd, 'k');
  });
  Addr peer = get<Addr>(child.fd());
  if (peer.qpn == 0) {
    WARN("unshare(CLONE_NEWNET) not permitted: network namespace case not run");
    return;
  }
  Dev dev;
  QpOptions opt;
  opt.gid_index = 1;
  Ep ep(dev, opt);
  Buf src(dev, 65536);
  put(child.fd(), ep.addr());
  ep.connect(peer);
  REQUIRE(get<char>(child.fd()) == 'r');
  fill(src.ptr(), 65536, 61);
  REQUIRE(post_rdma(ep.qp, 1, IBV_WR_RDMA_WRITE_WITH_IMM, src.ptr(), 65536, src.mr->lkey, peer.addr,
                    peer.rkey, IBV_SEND_SIGNALED, 3) == 0);
  CHECK(poll_one(ep.cq).status == IBV_WC_SUCCESS);
  REQUIRE(get<char>(child.fd()) == 'k');
  REQUIRE(child.wait() == 0);
}

TEST_CASE("softverbs: exiting with devices open leaves no registry files", "[softverbs]") {
  std::string dir = std::getenv("SOFTVERBS_DIR") != nullptr
                        ? std::getenv("SOFTVERBS_DIR")
                        : "/tmp/softverbs-" + std::to_string(getuid());
  Child child([](int fd) {
    auto* dev = new Dev();  // never closed: the library cleans up at exit
    auto* ep = new Ep(*dev);
    (void)ep;
    put(fd, 'r');
    std::exit(0);
  });
  REQUIRE(get<char>(child.fd()) == 'r');
  pid_t pid = child.pid();
  REQUIRE(child.wait() == 0);
  std::string nic = "nic-" + std::to_string(pid) + "-";
  std::string sys = "sys-" + std::to_string(pid) + "-";
  DIR* d = opendir(dir.c_str());
  REQUIRE(d != nullptr);
  while (dirent* e = readdir(d)) {
    std::string name = e->d_name;
    CHECK(name.rfind(nic, 0) != 0);
    CHECK(name.rfind(sys, 0) != 0);
    if (name.rfind("qp-", 0) == 0) {
      CHECK(read_file(dir + "/" + name).find("pid " + std::to_string(pid) + "\n") != 0);
    }
  }
  closedir(d);
}
