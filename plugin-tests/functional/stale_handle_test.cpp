// connect() given a handle whose listener is gone (its process finalized
// and exited, or was killed and left its endpoint behind, or it was this
// process's own listener in a finalized plugin context) or a forged one
// (naming no listener, or naming a file that is not one): an error naming
// the peer, never a crash, on every provider. libfabric's shm maps the
// region named in the address and trusts its header, and keeps the names
// of this process's closed endpoints with their unmapped regions: a forged
// handle or the own closed listener crashed it inside fi_av_insert (1.17)
// or at the first send (2.6). weft checks the region first
// (src/ofi/endpoint/peer_check.cpp) and names it when it refuses. tcp and udp end
// at WEFT_CONNECT_TIMEOUT_MS with the peer named; efa when the device
// gives up on the unanswered request, or at that timeout.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "log_capture.h"
#include "net_ops.h"
#include "two_rank.h"

using namespace weft;
using namespace weft::ft;

namespace {

// The listen handle's layout (src/core/handle_header.h): payload size at
// byte 6, the transport's payload from 32; libfabric's payload
// (src/ofi/wire/connection_messages.h) is the address's size, the address,
// then the listening process's identity where it has liveness links.
constexpr size_t kPayloadSizeAt = 6;
constexpr size_t kPayloadAt = 32;
constexpr size_t kMaxPayload = 96;
constexpr const char* kShmScheme = "fi_shm://";

// The listener's libfabric address.
std::string payload_of(const Handle& h) {
  auto size = static_cast<uint8_t>(h.bytes[kPayloadAt]);
  return std::string(h.bytes + kPayloadAt + 1, std::min<size_t>(size, kMaxPayload - 1));
}

// A handle naming another address, and no process (as a forger's).
void set_payload(Handle& h, const void* data, size_t size) {
  FT_REQUIRE(size > 0 && size < kMaxPayload, "forged address of " << size << " bytes");
  std::memset(h.bytes + kPayloadAt, 0, kMaxPayload);
  h.bytes[kPayloadAt] = static_cast<char>(size);
  std::memcpy(h.bytes + kPayloadAt + 1, data, size);
  h.bytes[kPayloadSizeAt] = static_cast<char>(size + 1);
}

bool is_shm(const std::string& payload) {
  return payload.rfind(kShmScheme, 0) == 0;
}

// The region name in an shm payload ("fi_shm://NAME\0").
std::string shm_name(const std::string& payload) {
  return std::string(payload.c_str() + std::strlen(kShmScheme));
}

// An EFA address (libfabric's efa_ep_addr): the device GID (16 bytes), the
// QP number (2), padding (2), the Q_Key (4), then libfabric's own pointer.
constexpr size_t kEfaAddressSize = 32;
constexpr size_t kEfaQpnAt = 16;

bool is_efa(const std::string& payload) {
  const char* provider = std::getenv("WEFT_OFI_PROVIDER");
  return provider != nullptr && std::string(provider) == "efa" && payload.size() == kEfaAddressSize;
}

int efa_qpn(const std::string& payload) {
  uint16_t qpn = 0;
  std::memcpy(&qpn, payload.data() + kEfaQpnAt, sizeof qpn);
  return qpn;
}

// IPv4/IPv6 socket address: the port, else -1.
int port_of(const std::string& payload) {
  sa_family_t family = 0;
  if (payload.size() < 4) return -1;
  std::memcpy(&family, payload.data(), sizeof family);
  if (family != AF_INET && family != AF_INET6) return -1;
  uint16_t port = 0;
  std::memcpy(&port, payload.data() + 2, 2);
  return ntohs(port);
}

// What the plugin's error must contain to name the peer: shm's check names
// the region file; a socket address's port appears in its text form.
std::string peer_text(const std::string& payload) {
  if (is_shm(payload)) return "/dev/shm/" + shm_name(payload);
  // libfabric's text form: fi_addr_efa://[GID]:QPN:QKEY.
  if (is_efa(payload)) return "]:" + std::to_string(efa_qpn(payload)) + ":";
  int port = port_of(payload);
  return port >= 0 ? ":" + std::to_string(port) : std::string();
}

enum class ListenerEnd { Finalize, Kill };

// A process that loads the plugin, listens and hands its listen handle
// back; then it finalizes and exits, or (Kill) waits to be killed while
// listening (a crashed rank). Call before this process loads the plugin.
struct ListenerProcess {
  pid_t pid = -1;
  Handle handle;
  bool handed = false;  // the handle arrived
};
ListenerProcess start_listener_process(int v, ListenerEnd end) {
  int fds[2];
  FT_REQUIRE(::pipe2(fds, O_CLOEXEC) == 0, "pipe: " << std::strerror(errno));
  std::fflush(nullptr);
  pid_t pid = ::fork();
  FT_REQUIRE(pid >= 0, "fork: " << std::strerror(errno));
  if (pid == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    ::close(fds[0]);
    int code = 0;
    try {
      auto c = open_plugin(v);
      const int dev = test_device(*c);
      Handle h;
      void* lc = do_listen(*c, dev, h);
      if (end == ListenerEnd::Finalize) {
        FT_OK(c->close_listen(lc));
        FT_OK(c->finalize());
        c.reset();
      }
      if (::write(fds[1], h.bytes, sizeof h.bytes) != static_cast<ssize_t>(sizeof h.bytes))
        code = 3;
      if (end == ListenerEnd::Kill) ::pause();  // never accepts; until killed
    } catch (const std::exception& e) {
      std::fprintf(stderr, "listener process: %s\n", e.what());
      code = 2;
    }
    ::_exit(code);
  }
  ::close(fds[1]);
  ListenerProcess out;
  out.pid = pid;
  out.handed = ::read(fds[0], out.handle.bytes, sizeof out.handle.bytes) ==
               static_cast<ssize_t>(sizeof out.handle.bytes);
  ::close(fds[0]);
  return out;
}

// The handle of a listener that is gone before this returns.
Handle handle_of_gone_listener(int v, ListenerEnd end) {
  ListenerProcess listener = start_listener_process(v, end);
  if (end == ListenerEnd::Kill) ::kill(listener.pid, SIGKILL);
  int status = 0;
  FT_REQUIRE(::waitpid(listener.pid, &status, 0) == listener.pid,
             "waitpid: " << std::strerror(errno));
  FT_REQUIRE(listener.handed, "the listener process sent no handle (status " << status << ")");
  if (end == ListenerEnd::Finalize) {
    FT_REQUIRE(WIFEXITED(status) && WEXITSTATUS(status) == 0,
               "the listener process failed (status " << status << ")");
  }
  return listener.handle;
}

// A port on 127.0.0.1 that nobody listens on, held bound (TCP and, when
// free, UDP) so that no one else takes it during the test.
struct UnusedPort {
  int tcp = -1, udp = -1, port = -1;
  UnusedPort() {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    tcp = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    FT_REQUIRE(tcp >= 0 && ::bind(tcp, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
                   ::getsockname(tcp, reinterpret_cast<sockaddr*>(&a), &len) == 0,
               "binding a TCP socket: " << std::strerror(errno));
    port = ntohs(a.sin_port);
    udp = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (udp >= 0) ::bind(udp, reinterpret_cast<sockaddr*>(&a), sizeof a);
  }
  ~UnusedPort() {
    if (tcp >= 0) ::close(tcp);
    if (udp >= 0) ::close(udp);
  }
};

// A file in /dev/shm that is not a region: what a forged or corrupt handle
// may name (another program's segment). Random bytes under a fixed seed.
struct GarbageShmFile {
  std::string name = "weft-forged-" + std::to_string(::getpid());
  GarbageShmFile() {
    std::vector<uint8_t> bytes(64 << 10);
    std::mt19937_64 rng(20240611);
    for (auto& b : bytes) b = static_cast<uint8_t>(rng());
    std::string path = "/dev/shm/" + name;
    int fd = ::open(path.c_str(), O_CREAT | O_TRUNC | O_WRONLY | O_CLOEXEC, 0600);
    FT_REQUIRE(fd >= 0, "creating " << path << ": " << std::strerror(errno));
    ssize_t written = ::write(fd, bytes.data(), bytes.size());
    ::close(fd);
    FT_REQUIRE(written == static_cast<ssize_t>(bytes.size()), "writing " << path);
  }
  ~GarbageShmFile() { ::unlink(("/dev/shm/" + name).c_str()); }
};

struct Case {
  std::string what;
  Handle handle;
};

// Connects with `h` until connect fails; it must fail (no comm, no crash)
// and the plugin's warnings must name the peer.
void expect_connect_error(NetClient& c, int dev, const Case& tried) {
  Handle h = tried.handle;
  const std::string payload = payload_of(h);
  const std::string expect = peer_text(payload);
  logged_lines().clear();
  void* sc = nullptr;
  ncclResult_t res = ncclSuccess;
  while (res == ncclSuccess) {
    res = c.connect(dev, h.bytes, &sc);
    FT_REQUIRE(sc == nullptr, tried.what << ": connect returned a comm");
    FT_DEADLINE(tried.what + ": waiting for connect to fail");
  }
  std::string log;
  bool named = false;
  for (const auto& [level, w] : logged_lines()) {
    if (level != NCCL_LOG_WARN) continue;
    log += "\n  " + w;
    named = named || (!expect.empty() && w.find(expect) != std::string::npos);
  }
  if (std::getenv("WEFT_TEST_VERBOSE"))
    std::fprintf(stderr, "stale_handle: %s -> %s%s\n", tried.what.c_str(), result_name(res),
                 log.c_str());
  FT_REQUIRE(named, tried.what << ": connect failed with " << result_name(res)
                               << " but no warning names the peer ('" << expect
                               << "'); warnings:" << log);
}

// Connects with the genuine handle and closes both ends. A failure names
// the result, how long it took, whether the listener had already accepted
// someone, and the plugin's warnings.
void connect_genuine(NetClient& c, int dev, Handle genuine, void* lc) {
  logged_lines().clear();
  const auto start = std::chrono::steady_clock::now();
  void *sc = nullptr, *rc = nullptr;
  while (!sc || !rc) {
    ncclResult_t res = ncclSuccess;
    if (!sc) res = c.connect(dev, genuine.bytes, &sc);
    const char* step = "connect";
    if (res == ncclSuccess && !rc) {
      res = c.accept(lc, &rc);
      step = "accept";
    }
    if (res != ncclSuccess) {
      std::string log;
      for (const auto& [level, w] : logged_lines())
        if (level == NCCL_LOG_WARN) log += "\n  " + w;
      const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                          std::chrono::steady_clock::now() - start)
                          .count();
      FT_REQUIRE(false, "the genuine handle after the stale and forged ones: "
                            << step << " returned " << result_name(res) << " after " << ms
                            << " ms (listener " << (rc ? "had" : "had not")
                            << " accepted a comm); warnings:" << log);
    }
    FT_DEADLINE("connecting with the genuine handle after the stale and forged ones");
  }
  FT_OK(c.close_send(sc));
  FT_OK(c.close_recv(rc));
}

}  // namespace

TEST_CASE("connect with a stale or forged handle fails naming the peer, never crashes",
          "[stale_handle]") {
  const int v = GENERATE(filter(abi_version_selected, values({6, 12})));
  INFO("ABI v" << v);
  auto r = run_one([&](Rank&) {
    ::setenv("WEFT_CONNECT_TIMEOUT_MS", "2000", 1);  // before any plugin reads its parameters
    std::vector<Case> stale;
    stale.push_back(
        {"listener finalized and exited", handle_of_gone_listener(v, ListenerEnd::Finalize)});
    stale.push_back({"listener killed", handle_of_gone_listener(v, ListenerEnd::Kill)});
    // The killed listener's shm region stays behind: remove it at the end.
    struct Leftover {
      std::string path;
      ~Leftover() {
        if (!path.empty()) ::unlink(path.c_str());
      }
    } leftover;
    if (std::string p = payload_of(stale.back().handle); is_shm(p))
      leftover.path = "/dev/shm/" + shm_name(p);

    auto c = load_plugin(v);
    FT_OK(c->init(capture_log));
    const int dev = test_device(*c);
    if (v >= 11) {
      // This process's own listener, gone with the plugin context that
      // owned its endpoint (v11+ can finalize and init again).
      Handle own;
      FT_OK(c->close_listen(do_listen(*c, dev, own)));
      FT_OK(c->finalize());
      FT_OK(c->init(capture_log));
      stale.push_back({"own listener, context finalized", own});
    }
    Handle genuine;
    void* lc = do_listen(*c, dev, genuine);
    const std::string payload = payload_of(genuine);

    // Forged from the genuine handle: same header, another address. Tried
    // first: on shm the forged region is what crashed the provider.
    std::vector<Case> cases;
    UnusedPort unused;
    GarbageShmFile garbage;
    if (is_shm(payload)) {
      for (const auto& [what, name] : {std::pair<std::string, std::string>{
                                           "forged: a file that is not a region", garbage.name},
                                       {"forged: no such region", garbage.name + "-missing"}}) {
        Case forged{what, genuine};
        std::string address = kShmScheme + name;
        set_payload(forged.handle, address.c_str(), address.size() + 1);
        cases.push_back(forged);
      }
    } else if (is_efa(payload)) {
      // The same QP number on a device nobody has (the GID's last byte
      // changed): the device's sends go unanswered.
      Case forged{"forged: a GID no device has", genuine};
      std::string address = payload;
      address[15] = static_cast<char>(address[15] ^ 0x5a);
      set_payload(forged.handle, address.data(), address.size());
      cases.push_back(forged);
    } else {
      FT_REQUIRE(port_of(payload) >= 0,
                 "the listen handle holds neither an shm nor a socket address: cannot forge one");
      Case forged{"forged: a port nobody listens on", genuine};
      std::string address = payload;
      uint16_t port = htons(static_cast<uint16_t>(unused.port));
      std::memcpy(address.data() + 2, &port, 2);
      set_payload(forged.handle, address.data(), address.size());
      cases.push_back(forged);
    }

    cases.insert(cases.end(), stale.begin(), stale.end());
    for (const auto& tried : cases) expect_connect_error(*c, dev, tried);

    // The plugin still works: the genuine handle connects.
    connect_genuine(*c, dev, genuine, lc);
    FT_OK(c->close_listen(lc));
    FT_OK(c->finalize());
  });
  REQUIRE_RANKS(r);
}

namespace {

// A listener process that waits to be killed (a rank that crashes before
// it accepts), killed at the latest when this goes out of scope.
struct DoomedListener {
  pid_t pid = -1;
  Handle handle;
  void kill() {
    if (pid < 0) return;
    ::kill(pid, SIGKILL);
    int status = 0;
    ::waitpid(pid, &status, 0);
    pid = -1;
  }
  ~DoomedListener() { kill(); }
};

void start_doomed_listener(int v, DoomedListener* out) {
  ListenerProcess listener = start_listener_process(v, ListenerEnd::Kill);
  out->pid = listener.pid;
  out->handle = listener.handle;
  FT_REQUIRE(listener.handed, "the listener process sent no handle");
}

}  // namespace

// NCCL gives connect no time limit of its own: a connect to a listener whose
// process died before it accepted must fail soon, as a dead peer does after
// setup (within seconds), not at WEFT_CONNECT_TIMEOUT_MS (300 s by
// default). Over tcp the provider neither delivers the request nor fails
// it: weft watches the listening process over its liveness link
// (core/peer_links.h, ListenerWatch).
TEST_CASE("a connect to a listener killed before it accepts fails within seconds",
          "[dead_listener]") {
  const int v = newest_selected_version();
  if (v == 0) return;
  for (const bool killed_first : {true, false}) {
    INFO((killed_first ? "killed before the connect" : "killed while connecting"));
    auto r = run_one([&](Rank&) {
      ::setenv("WEFT_CONNECT_TIMEOUT_MS", "120000", 1);  // far beyond the bound below
      DoomedListener listener;
      start_doomed_listener(v, &listener);
      if (killed_first) listener.kill();
      auto c = load_plugin(v);
      FT_OK(c->init(capture_log));
      const int dev = test_device(*c);
      void* sc = nullptr;
      ncclResult_t res = ncclSuccess;
      const auto start = std::chrono::steady_clock::now();
      for (int calls = 0; res == ncclSuccess; ++calls) {
        res = c->connect(dev, listener.handle.bytes, &sc);
        FT_REQUIRE(sc == nullptr, "connect returned a comm nobody accepted");
        if (calls == 100) listener.kill();  // the request is on its way by now
        FT_REQUIRE(std::chrono::steady_clock::now() - start < std::chrono::seconds(15),
                   "connect neither failed nor completed within 15 s of the listener's death");
        ::usleep(1000);
      }
      FT_REQUIRE(res == ncclRemoteError, "connect failed with " << result_name(res));
      // What says so: the liveness link, or (shm) the check of the peer's
      // region, which names it.
      const std::string peer = peer_text(payload_of(listener.handle));
      bool named = false;
      for (const auto& [level, w] : logged_lines()) {
        if (level == NCCL_LOG_WARN && (w.find("listening process is gone") != std::string::npos ||
                                       (!peer.empty() && w.find(peer) != std::string::npos)))
          named = true;
      }
      FT_REQUIRE(named, "no warning says the listening process is gone or names " << peer);
      FT_OK(c->finalize());
    });
    REQUIRE_RANKS(r);
  }
}
