// The software NIC of a process: one thread that moves RC traffic between
// processes, and the tables of memory regions, QPs and peers it serves.
// It knows no ibv_* entry point: a device personality (ibverbs/) posts work
// to its QPs and kicks it.
#pragma once

#include <infiniband/verbs.h>
#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <queue>
#include <shared_mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "context.h"
#include "memory.h"
#include "queue_pair.h"

namespace softverbs {

struct Conn;
struct Frame;

// The NIC side of another process (or this one, for loopback).
struct Peer {
  std::string path;
  pid_t pid = 0;
  std::atomic<bool> dead{false};
  std::atomic<bool> answered{false};  // it answered a request once (EFA: 13, not 15)
  // NIC thread only:
  Conn* conn = nullptr;
  bool connect_scheduled = false;
  std::vector<std::weak_ptr<Qp>> waiting;  // QPs waiting for the connection
};

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
  // SRD: where QP `qpn` at `gid` lives (any thread; cached). Leaves
  // out->peer null when the address names nothing alive.
  void resolve_srd(uint32_t qpn, const ibv_gid& gid, SrdDest* out);
  // Forgets the cached route to `qpn` (its owner said it has no such QP: the
  // number may belong to another process now).
  void forget_srd(uint32_t qpn);

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
  // SRD (srd.cpp): connectionless, unordered, every WR on its own.
  void pump_srd(const std::shared_ptr<Qp>& qp);
  void pump_srd_locked(Qp& qp);
  void send_request(Conn& conn, const Frame& f, const SendWr& wr);
  void land_request(Conn& conn, const Frame& f, const std::shared_ptr<Qp>& qp,
                    std::unique_lock<std::mutex>& lock, char* target, std::shared_ptr<Mr> mr,
                    RecvWr recv, bool consumes);
  void execute_srd(Conn& conn, const Frame& f, const std::shared_ptr<Qp>& qp,
                   std::unique_lock<std::mutex>& lock);
  void on_response_srd(Conn& conn, const Frame& f, Qp& qp);
  void finish_read_srd(Conn& conn, Qp& qp);
  void complete_srd(Qp& qp, size_t index);
  void fail_srd(Qp& qp, size_t index, ibv_wc_status status, uint32_t vendor_err);
  void kick_after(Qp& qp, Clock::duration delay);

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
  struct SrdRoute {
    std::shared_ptr<Peer> peer;
    std::vector<std::pair<uint8_t, ibv_gid>> ports;
  };
  std::unordered_map<uint32_t, SrdRoute> srd_routes_;  // under peers_mu_

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
