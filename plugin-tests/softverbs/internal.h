// softverbs internals shared by its translation units. See softverbs.h for
// the model; nothing here is exported.
#pragma once

#include <infiniband/verbs.h>
#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <queue>
#include <random>
#include <shared_mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "softverbs.h"

#define SOFTVERBS_API extern "C" __attribute__((visibility("default")))

namespace softverbs {

using Clock = std::chrono::steady_clock;

// ------------------------------------------------------------ environment --
long env_long(const char* name, long fallback);
std::string env_string(const char* name, const std::string& fallback);
std::vector<std::string> split(const std::string& text, char separator);
// SOFTVERBS_LOG=1: a line on stderr per control-path event.
void log(const char* format, ...) __attribute__((format(printf, 1, 2)));

// ------------------------------------------------------------- counters ---
// In the order of struct softverbs_counters.
enum Counter : int {
  kDoorbells,
  kSendWrs,
  kSendWrsSend,
  kSendWrsSendImm,
  kSendWrsWrite,
  kSendWrsWriteImm,
  kSendWrsRead,
  kInlineWrs,
  kSignaledWrs,
  kRecvPosts,
  kRecvWrs,
  kPollCalls,
  kCompletions,
  kErrorCompletions,
  kBytesWritten,
  kBytesRead,
  kBytesSent,
  kPacketsSent,
  kPacketsReceived,
  kRnrNaksSent,
  kRnrNaksReceived,
  kRetransmits,
  kEceSet,
  kCounterCount,
};
void count(Counter counter, uint64_t n = 1);
void read_counters(softverbs_counters* out);
void reset_counters();
// One JSON object (no newline) with the pid and every counter.
std::string counters_json();

// ---------------------------------------------------------------- handles --
// Every object handed to the application is a verbs struct followed by a
// pointer to its owner, so a verbs pointer leads back to the owner.
template <typename Verbs, typename Owner>
struct Handle {
  Verbs verbs;
  Owner* owner;
};

template <typename Owner, typename Verbs>
Owner* owner_of(Verbs* verbs) {
  if (verbs == nullptr) return nullptr;
  return reinterpret_cast<Handle<Verbs, Owner>*>(verbs)->owner;
}

// ---------------------------------------------------------------- process --
pid_t self_pid();
// Per-process random tag: names of this process's files in the registry.
uint64_t process_nonce();
// SOFTVERBS_DIR or /tmp/softverbs-<uid>, created on demand ("" on failure).
std::string registry_dir();
bool pid_alive(pid_t pid);
// Removes a directory tree (best effort).
void remove_tree(const std::string& path);

// ---------------------------------------------------------------- devices --
struct GidSlot {
  ibv_gid gid{};
  uint32_t type = IBV_GID_TYPE_IB;
  bool valid = false;
};

struct PortInfo {
  uint16_t lid = 0;
  std::vector<GidSlot> gids;  // the whole table (gid_tbl_len), some empty
};

struct DeviceInfo {
  std::string name;
  int index = 0;
  bool ib = false;
  uint64_t node_guid = 0;  // host order
  std::string netdev;
  unsigned ifindex = 0;
  uint8_t speed = 32;
  uint8_t width = 2;
  ibv_mtu mtu = IBV_MTU_1024;
  std::vector<PortInfo> ports;  // ports[p - 1]
  std::string pci_path;
};

struct Device {
  Handle<ibv_device, Device> handle{};
  DeviceInfo info;
};

// Builds the devices the environment describes now (owned by the library,
// alive until it unloads) and writes their fake sysfs trees.
std::vector<Device*> scan_devices();
// Removes this process's fake sysfs trees (at unload).
void remove_sysfs();
void write_port_state(const DeviceInfo& info, int port, bool up);

// -------------------------------------------------------------- registry ---
struct RemotePort {
  int port = 0;
  uint16_t lid = 0;
  std::vector<ibv_gid> gids;
};

struct RemoteQp {
  pid_t pid = 0;
  std::string nic;
  bool ib = false;
  std::vector<RemotePort> ports;
};

// Creates qp-<qpn> for a new QP of `device` and returns the qpn (0 when none
// could be allocated).
uint32_t registry_create_qp(const std::string& nic_path, const DeviceInfo& device);
void registry_remove_qp(uint32_t qpn);
bool registry_read_qp(uint32_t qpn, RemoteQp* out);
// Removes files of processes that no longer exist.
void registry_reclaim();

// -------------------------------------------------------------- objects ----
class Nic;
class Qp;
class Cq;
class Context;

// A registered memory region. Remote and local addresses are in iova space:
// host address = base + (address - iova).
class Mr {
 public:
  Handle<ibv_mr, Mr> handle{};
  class Pd* pd = nullptr;
  uint64_t iova = 0;
  char* base = nullptr;
  size_t length = 0;
  int access = 0;
  void* mapping = nullptr;  // dma-buf pages mmap'd by softverbs
  size_t mapping_length = 0;

  Mr() = default;
  Mr(const Mr&) = delete;
  Mr& operator=(const Mr&) = delete;
  ~Mr();

  // Host pointer for [address, address + len) or nullptr when out of bounds.
  char* translate(uint64_t address, uint64_t len) const;
};

class Pd {
 public:
  Handle<ibv_pd, Pd> handle{};
  std::shared_ptr<Context> context;
  std::atomic<int> users{0};  // MRs and QPs
};

// A piece of local memory a WR reads from or writes to; keeps its MR (and a
// dma-buf mapping) alive while the NIC may still touch it.
struct Piece {
  char* ptr = nullptr;
  size_t len = 0;
  std::shared_ptr<Mr> mr;
};

struct Cqe {
  ibv_wc wc{};
  Qp* qp = nullptr;  // for slot accounting; CQEs of a destroyed QP are purged
  bool send = false;
  uint64_t index = 0;  // position in the QP's send or receive queue
};

class Channel {
 public:
  Handle<ibv_comp_channel, Channel> handle{};
  std::mutex mu;
  std::deque<Cq*> events;
  std::atomic<int> users{0};
  ~Channel();
  void notify(Cq* cq);
};

class Cq {
 public:
  Handle<ibv_cq, Cq> handle{};
  Context* context = nullptr;
  Channel* channel = nullptr;
  int depth = 0;
  std::atomic<int> users{0};  // QPs

  std::mutex mu;
  std::deque<Cqe> entries;
  bool armed = false;
  bool overflowed = false;
  int reorder_window = 0;
  std::mt19937_64 rng;

  // Adds a completion (NIC thread or a poster); raises the channel event and
  // the CQ overflow event.
  void push(const Cqe& entry);
  // Removes the entries of a QP (destroy or reset).
  void purge(const Qp* qp);
  int poll(int max, ibv_wc* out);
};

struct SendWr {
  uint64_t wr_id = 0;
  uint64_t index = 0;
  uint32_t psn = 0;
  ibv_wr_opcode opcode = IBV_WR_SEND;
  bool signaled = false;
  uint32_t imm = 0;
  uint64_t remote_addr = 0;
  uint32_t rkey = 0;
  uint64_t length = 0;
  std::vector<Piece> pieces;
  std::vector<char> inline_data;
  ibv_wc_status preset = IBV_WC_SUCCESS;  // fails when it reaches the head
  int rnr_tries = 0;
  bool dropping = false;  // the target dropped it; fail at drop_since+retry
  Clock::time_point drop_since{};
};

struct RecvWr {
  uint64_t wr_id = 0;
  uint64_t index = 0;
  uint64_t capacity = 0;
  std::vector<Piece> pieces;
  ibv_wc_status preset = IBV_WC_SUCCESS;
};

// The NIC side of another process (or this one, for loopback).
struct Peer {
  std::string path;
  pid_t pid = 0;
  std::atomic<bool> dead{false};
  // NIC thread only:
  struct Conn* conn = nullptr;
  bool connect_scheduled = false;
  std::vector<std::weak_ptr<Qp>> waiting;  // QPs waiting for the connection
};

class Qp : public std::enable_shared_from_this<Qp> {
 public:
  Handle<ibv_qp, Qp> handle{};
  std::shared_ptr<Context> context;
  Nic* nic = nullptr;
  Pd* pd = nullptr;
  Cq* send_cq = nullptr;
  Cq* recv_cq = nullptr;
  uint32_t qpn = 0;
  bool sig_all = false;
  ibv_qp_cap cap{};
  void* user_context = nullptr;

  std::atomic<uint64_t> sq_retired{0};
  std::atomic<uint64_t> rq_retired{0};
  std::atomic<bool> in_ready{false};

  std::mutex mu;
  // Guarded by mu.
  bool destroyed = false;
  ibv_qp_state state = IBV_QPS_RESET;
  uint8_t port = 1;
  uint16_t pkey_index = 0;
  unsigned access = 0;
  ibv_mtu path_mtu = IBV_MTU_1024;
  uint32_t dest_qpn = 0;
  uint32_t rq_psn = 0;
  uint32_t sq_psn = 0;
  uint8_t min_rnr_timer = 0;
  uint8_t timeout = 0;
  uint8_t retry_cnt = 0;
  uint8_t rnr_retry = 0;
  uint8_t max_rd_atomic = 0;
  uint8_t max_dest_rd_atomic = 0;
  bool ece_supported = false;  // SOFTVERBS_ECE was set when the QP was created
  uint32_t ece_options = 0;    // SOFTVERBS_ECE at creation, then what ibv_set_ece set
  ibv_ah_attr ah{};
  std::shared_ptr<Peer> peer;
  uint8_t peer_port = 0;
  bool unreachable = false;  // the RTR address named no live port
  bool broken = false;       // the connection to the peer broke
  bool fail_scheduled = false;

  std::deque<SendWr> sq;
  size_t send_next = 0;  // sq[send_next] is the next WR to transmit
  uint64_t sq_posted = 0;
  uint32_t next_psn = 0;
  Clock::time_point resume_at{};

  std::deque<RecvWr> rq;
  uint64_t rq_posted = 0;

  uint32_t expected_psn = 0;     // responder
  bool nak_outstanding = false;  // responder dropped the rest after a NAK
};

class Context {
 public:
  Handle<verbs_context, Context> handle{};
  Device* device = nullptr;
  Nic* nic = nullptr;
  int async_fd = -1;
  int reorder_window = 0;
  uint64_t reorder_seed = 1;
  std::unique_ptr<std::atomic<bool>[]> port_down;

  std::mutex mu;
  bool closed = false;
  std::deque<ibv_async_event> events;

  Context() = default;
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;
  ~Context();

  ibv_context* verbs() { return &handle.verbs.context; }
  const DeviceInfo& info() const { return device->info; }
  void queue_event(const ibv_async_event& event);
  bool is_port_down(int port) const;
};

Context* context_of(ibv_context* context);

// Flushes every WR of qp with IBV_WC_WR_FLUSH_ERR and moves it to ERR
// (qp.mu held).
void enter_error(Qp& qp);
void push_send_cqe(Qp& qp, const SendWr& wr, ibv_wc_status status);
void push_recv_cqe(Qp& qp, const RecvWr& wr, ibv_wc_status status);

// ------------------------------------------------------------------- NIC ---
struct Conn;
struct Frame;

class Nic {
 public:
  // Starts the NIC thread; nullptr (errno set) on failure.
  static std::unique_ptr<Nic> start();
  ~Nic();
  // Joins the thread, closes the sockets and removes the registry files; the
  // object stays usable (calls become no-ops) for late callers at exit.
  void shutdown();
  Nic(const Nic&) = delete;
  Nic& operator=(const Nic&) = delete;

  const std::string& path() const { return path_; }
  Clock::duration retry_time() const { return retry_; }

  // Memory regions (any thread).
  uint32_t add_mr(const std::shared_ptr<Mr>& mr);  // sets the keys
  void remove_mr(Mr* mr);
  std::shared_ptr<Mr> find_lkey(uint32_t lkey);
  std::shared_ptr<Mr> find_rkey(uint32_t rkey);

  // Queue pairs (any thread).
  void add_qp(const std::shared_ptr<Qp>& qp);
  void remove_qp(uint32_t qpn);
  std::shared_ptr<Qp> find_qp(uint32_t qpn);
  std::vector<std::shared_ptr<Qp>> all_qps();
  // The QP has work (new WRs, a new route): the NIC looks at it soon.
  void kick(Qp& qp);
  std::shared_ptr<Peer> peer(const std::string& path, pid_t pid);

  // Fault injection: called for each send WR posted; returns the status the
  // WR must complete with (success for none).
  ibv_wc_status on_send_posted();
  void port_down_after(const std::shared_ptr<Context>& context, long ms);

 private:
  Nic() = default;
  void run();
  void post(std::function<void()> command);
  void ring();

  // NIC thread.
  void drain_commands();
  void after(Clock::duration delay, std::function<void()> fn);
  int next_timeout_ms();
  void run_timers();
  void accept_all();
  Conn* connect_peer(const std::shared_ptr<Peer>& peer);
  void close_conn(Conn& conn);
  void on_readable(Conn& conn);
  void flush(Conn& conn);
  void queue(Conn& conn, const Frame& frame, const char* payload, size_t len,
             const std::shared_ptr<Mr>& keep);
  void on_frame(Conn& conn, const Frame& frame);
  void on_request(Conn& conn, const Frame& frame);
  void execute(Conn& conn, const Frame& frame, const std::shared_ptr<Qp>& qp,
               std::unique_lock<std::mutex>& lock);
  void on_response(Conn& conn, const Frame& frame);
  void finish_payload(Conn& conn);
  void respond(Conn& conn, const Frame& request, uint8_t code, uint8_t rnr_timer = 0);
  void pump(const std::shared_ptr<Qp>& qp);
  void pump_locked(Qp& qp, Conn* conn);
  bool blocked(Qp& qp);
  void schedule_fail(Qp& qp);
  void schedule_resume(Qp& qp);
  void fail_head(Qp& qp, ibv_wc_status status);
  void complete_head(Qp& qp);
  void peer_lost(Peer& peer);
  void link_down();
  void port_down(const std::shared_ptr<Context>& context);
  void wake_waiting(Peer& peer);

  std::string path_;
  int epoll_fd_ = -1;
  int doorbell_fd_ = -1;
  int listen_fd_ = -1;
  std::thread thread_;
  std::atomic<bool> stopping_{false};
  bool shut_ = false;
  Clock::duration retry_{std::chrono::milliseconds(200)};

  std::mutex commands_mu_;
  std::vector<std::function<void()>> commands_;
  std::vector<std::shared_ptr<Qp>> ready_;
  bool rung_ = false;

  std::shared_mutex mrs_mu_;
  std::unordered_map<uint32_t, std::shared_ptr<Mr>> by_lkey_;
  std::unordered_map<uint32_t, std::shared_ptr<Mr>> by_rkey_;
  uint32_t next_mr_ = 1;

  std::mutex qps_mu_;
  std::unordered_map<uint32_t, std::shared_ptr<Qp>> qps_;

  std::mutex peers_mu_;
  std::map<std::string, std::shared_ptr<Peer>> peers_;

  // Faults.
  std::atomic<uint64_t> sends_posted_{0};
  uint64_t fault_wc_error_at_ = 0;
  ibv_wc_status fault_wc_status_ = IBV_WC_GENERAL_ERR;
  uint64_t fault_link_down_after_ = 0;
  std::atomic<long> fault_rnr_left_{0};

  // NIC thread only.
  struct Timer {
    Clock::time_point at;
    uint64_t seq;
    std::function<void()> fn;
    bool operator>(const Timer& other) const {
      return at != other.at ? at > other.at : seq > other.seq;
    }
  };
  std::priority_queue<Timer, std::vector<Timer>, std::greater<Timer>> timers_;
  uint64_t timer_seq_ = 0;
  std::vector<std::unique_ptr<Conn>> conns_;
  std::vector<Conn*> dirty_;
  bool link_is_down_ = false;
};

}  // namespace softverbs
