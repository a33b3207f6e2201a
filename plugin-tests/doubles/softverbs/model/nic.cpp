// softverbs NIC: one thread per process that moves RC traffic between
// processes over Unix stream sockets (see wire.h), acts as the target for
// incoming requests, retries after RNR NAKs and drops, and fails WRs the way
// a real requester does when the peer is gone.

#include "nic.h"

#include <fcntl.h>
#include <pthread.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>

#include "completion.h"
#include "context.h"
#include "counters.h"
#include "device.h"
#include "env.h"
#include "process.h"
#include "queue_pair.h"
#include "registry.h"
#include "wire.h"

namespace softverbs {

namespace {

constexpr size_t kDirectRead = 64 << 10;  // larger payloads skip the buffer
constexpr size_t kCopyLimit = 16 << 10;   // smaller payloads are copied
constexpr size_t kChunk = 256 << 10;
constexpr int kMaxIov = 64;

// IB's RNR timer encoding (min_rnr_timer), in microseconds.
constexpr uint32_t kRnrMicros[32] = {
    655360, 10,    20,    30,    40,    60,     80,     120,    160,    240,    320,
    480,    640,   960,   1280,  1920,  2560,   3840,   5120,   7680,   10240,  15360,
    20480,  30720, 40960, 61440, 81920, 122880, 163840, 245760, 327680, 491520,
};

ibv_wc_status parse_status(const std::string& text) {
  static const std::pair<const char*, ibv_wc_status> kNames[] = {
      {"loc_len", IBV_WC_LOC_LEN_ERR},
      {"loc_qp_op", IBV_WC_LOC_QP_OP_ERR},
      {"loc_prot", IBV_WC_LOC_PROT_ERR},
      {"flush", IBV_WC_WR_FLUSH_ERR},
      {"bad_resp", IBV_WC_BAD_RESP_ERR},
      {"loc_access", IBV_WC_LOC_ACCESS_ERR},
      {"rem_inv_req", IBV_WC_REM_INV_REQ_ERR},
      {"rem_access", IBV_WC_REM_ACCESS_ERR},
      {"rem_op", IBV_WC_REM_OP_ERR},
      {"retry_exc", IBV_WC_RETRY_EXC_ERR},
      {"rnr_retry_exc", IBV_WC_RNR_RETRY_EXC_ERR},
      {"fatal", IBV_WC_FATAL_ERR},
      {"resp_timeout", IBV_WC_RESP_TIMEOUT_ERR},
      {"general", IBV_WC_GENERAL_ERR},
  };
  for (const auto& [name, status] : kNames) {
    if (text == name) return status;
  }
  char* end = nullptr;
  long v = std::strtol(text.c_str(), &end, 0);
  if (end != nullptr && *end == '\0' && v > 0 && v <= IBV_WC_TM_RNDV_INCOMPLETE) {
    return static_cast<ibv_wc_status>(v);
  }
  return IBV_WC_GENERAL_ERR;
}

void epoll_set(int epoll_fd, int op, int fd, uint32_t events, void* tag) {
  epoll_event ev{};
  ev.events = events;
  ev.data.ptr = tag;
  epoll_ctl(epoll_fd, op, fd, &ev);
}

}  // namespace

// ------------------------------------------------------------- lifecycle ---
std::unique_ptr<Nic> Nic::start() {
  std::unique_ptr<Nic> nic(new Nic());
  forget_registry_dir();  // made again: a test may have removed it since
  std::string dir = registry_dir();
  if (dir.empty()) return nullptr;
  registry_reclaim();
  static std::atomic<int> generation{0};
  char name[96];
  std::snprintf(name, sizeof(name), "/nic-%d-%" PRIx64 "-%d.sock", static_cast<int>(getpid()),
                process_nonce(), generation.fetch_add(1));
  nic->path_ = dir + name;
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (nic->path_.size() >= sizeof(addr.sun_path)) {
    std::fprintf(stderr, "softverbs: socket path too long: %s\n", nic->path_.c_str());
    errno = ENAMETOOLONG;
    return nullptr;
  }
  std::memcpy(addr.sun_path, nic->path_.c_str(), nic->path_.size() + 1);
  nic->listen_fd_ = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  nic->epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
  nic->doorbell_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (nic->listen_fd_ < 0 || nic->epoll_fd_ < 0 || nic->doorbell_fd_ < 0) return nullptr;
  unlink(nic->path_.c_str());
  if (bind(nic->listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      listen(nic->listen_fd_, SOMAXCONN) != 0) {
    return nullptr;
  }
  epoll_set(nic->epoll_fd_, EPOLL_CTL_ADD, nic->doorbell_fd_, EPOLLIN, nic.get());
  epoll_set(nic->epoll_fd_, EPOLL_CTL_ADD, nic->listen_fd_, EPOLLIN, &nic->listen_fd_);

  nic->retry_ = std::chrono::milliseconds(std::max(1L, env_long("SOFTVERBS_RETRY_MS", 200)));
  std::vector<std::string> wc = split(env_string("SOFTVERBS_FAULT_WC_ERROR", ""), ':');
  if (!wc.empty()) {
    nic->fault_wc_error_at_ =
        static_cast<uint64_t>(std::max(0L, std::strtol(wc[0].c_str(), nullptr, 0)));
    if (wc.size() > 1) nic->fault_wc_status_ = parse_status(wc[1]);
  }
  nic->fault_link_down_after_ =
      static_cast<uint64_t>(std::max(0L, env_long("SOFTVERBS_FAULT_LINK_DOWN", 0)));
  nic->fault_rnr_left_ = std::max(0L, env_long("SOFTVERBS_FAULT_RNR", 0));

  Nic* raw = nic.get();
  nic->thread_ = std::thread([raw] {
    pthread_setname_np(pthread_self(), "softverbs-nic");
    raw->run();
  });
  log("NIC started: %s", nic->path_.c_str());
  return nic;
}

Nic::~Nic() {
  shutdown();
  qps_.clear();
  by_lkey_.clear();
  by_rkey_.clear();
  // Timers hold weak references only; peers drop their waiting lists.
  while (!timers_.empty()) timers_.pop();
}

void Nic::shutdown() {
  if (shut_) return;
  shut_ = true;
  stopping_ = true;
  if (thread_.joinable()) {
    ring();
    thread_.join();
  }
  for (auto& conn : conns_) {
    if (conn->fd >= 0) close(conn->fd);
  }
  conns_.clear();
  if (listen_fd_ >= 0) {
    close(listen_fd_);
    unlink(path_.c_str());
    listen_fd_ = -1;
  }
  if (epoll_fd_ >= 0) close(epoll_fd_);
  if (doorbell_fd_ >= 0) close(doorbell_fd_);
  epoll_fd_ = -1;
  doorbell_fd_ = -1;
  std::lock_guard<std::mutex> lock(qps_mu_);
  for (auto& [qpn, qp] : qps_) registry_remove_qp(qpn);
  registry_forget_nic(path_);
  log("NIC stopped: %s (%zu QPs left)", path_.c_str(), qps_.size());
}

void Nic::ring() {
  if (doorbell_fd_ < 0) return;  // shut down
  uint64_t one = 1;
  ssize_t r = write(doorbell_fd_, &one, sizeof(one));
  (void)r;
}

void Nic::post(std::function<void()> command) {
  bool need_ring = false;
  {
    std::lock_guard<std::mutex> lock(commands_mu_);
    commands_.push_back(std::move(command));
    need_ring = !rung_;
    rung_ = true;
  }
  if (need_ring) ring();
}

void Nic::kick(Qp& qp) {
  if (qp.in_ready.exchange(true)) return;
  bool need_ring = false;
  {
    std::lock_guard<std::mutex> lock(commands_mu_);
    ready_.push_back(qp.shared_from_this());
    need_ring = !rung_;
    rung_ = true;
  }
  if (need_ring) ring();
}

void Nic::run() {
  epoll_event events[64];
  while (!stopping_) {
    int n = epoll_wait(epoll_fd_, events, 64, next_timeout_ms());
    for (int i = 0; i < n; ++i) {
      void* tag = events[i].data.ptr;
      if (tag == this) {
        uint64_t v;
        ssize_t r = read(doorbell_fd_, &v, sizeof(v));
        (void)r;
      } else if (tag == &listen_fd_) {
        accept_all();
      } else {
        Conn* conn = static_cast<Conn*>(tag);
        if (!conn->closed && (events[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR))) {
          on_readable(*conn);
        }
        if (!conn->closed && (events[i].events & EPOLLOUT)) flush(*conn);
      }
    }
    drain_commands();
    run_timers();
    std::vector<Conn*> dirty;
    dirty.swap(dirty_);
    for (Conn* conn : dirty) {
      conn->dirty = false;
      if (!conn->closed) flush(*conn);
    }
    std::erase_if(conns_, [](const std::unique_ptr<Conn>& c) { return c->closed; });
  }
}

void Nic::drain_commands() {
  std::vector<std::function<void()>> commands;
  std::vector<std::shared_ptr<Qp>> ready;
  {
    std::lock_guard<std::mutex> lock(commands_mu_);
    commands.swap(commands_);
    ready.swap(ready_);
    rung_ = false;
  }
  for (auto& command : commands) command();
  for (auto& qp : ready) {
    qp->in_ready.store(false);
    pump(qp);
  }
}

// ---------------------------------------------------------------- timers ---
void Nic::after(Clock::duration delay, std::function<void()> fn) {
  timers_.push(Timer{Clock::now() + delay, timer_seq_++, std::move(fn)});
}

int Nic::next_timeout_ms() {
  if (timers_.empty()) return -1;
  auto left = timers_.top().at - Clock::now();
  if (left <= Clock::duration::zero()) return 0;
  auto ms = std::chrono::ceil<std::chrono::milliseconds>(left).count();
  return static_cast<int>(std::min<int64_t>(ms, 60000));
}

void Nic::run_timers() {
  auto now = Clock::now();
  while (!timers_.empty() && timers_.top().at <= now) {
    std::function<void()> fn = timers_.top().fn;
    timers_.pop();
    fn();
  }
}

// ---------------------------------------------------------------- tables ---
uint32_t Nic::add_mr(const std::shared_ptr<Mr>& mr) {
  std::unique_lock<std::shared_mutex> lock(mrs_mu_);
  // Distinct per process (and from the lkeys), so a peer's stale or mixed-up
  // key misses instead of hitting another region.
  uint32_t salt = static_cast<uint32_t>(process_nonce());
  uint32_t lkey = 0;
  uint32_t rkey = 0;
  do {
    uint32_t n = next_mr_++;
    lkey = (n * 0x9e3779b1u) ^ salt;
    rkey = (n * 0x85ebca77u) ^ (salt * 3u + 0x5bd1e995u);
  } while (lkey == 0 || rkey == 0 || by_lkey_.count(lkey) != 0 || by_rkey_.count(rkey) != 0);
  mr->handle.verbs.lkey = lkey;
  mr->handle.verbs.rkey = rkey;
  by_lkey_[lkey] = mr;
  by_rkey_[rkey] = mr;
  return lkey;
}

void Nic::remove_mr(Mr* mr) {
  std::unique_lock<std::shared_mutex> lock(mrs_mu_);
  by_lkey_.erase(mr->handle.verbs.lkey);
  by_rkey_.erase(mr->handle.verbs.rkey);
}

std::shared_ptr<Mr> Nic::find_lkey(uint32_t lkey) {
  std::shared_lock<std::shared_mutex> lock(mrs_mu_);
  auto it = by_lkey_.find(lkey);
  return it == by_lkey_.end() ? nullptr : it->second;
}

std::shared_ptr<Mr> Nic::find_rkey(uint32_t rkey) {
  std::shared_lock<std::shared_mutex> lock(mrs_mu_);
  auto it = by_rkey_.find(rkey);
  return it == by_rkey_.end() ? nullptr : it->second;
}

void Nic::add_qp(const std::shared_ptr<Qp>& qp) {
  std::lock_guard<std::mutex> lock(qps_mu_);
  qps_[qp->qpn] = qp;
}

void Nic::remove_qp(uint32_t qpn) {
  std::shared_ptr<Qp> gone;  // released outside the lock
  std::lock_guard<std::mutex> lock(qps_mu_);
  auto it = qps_.find(qpn);
  if (it == qps_.end()) return;
  gone = std::move(it->second);
  qps_.erase(it);
}

std::shared_ptr<Qp> Nic::find_qp(uint32_t qpn) {
  std::lock_guard<std::mutex> lock(qps_mu_);
  auto it = qps_.find(qpn);
  return it == qps_.end() ? nullptr : it->second;
}

std::vector<std::shared_ptr<Qp>> Nic::all_qps() {
  std::lock_guard<std::mutex> lock(qps_mu_);
  std::vector<std::shared_ptr<Qp>> out;
  out.reserve(qps_.size());
  for (auto& [qpn, qp] : qps_) out.push_back(qp);
  return out;
}

std::shared_ptr<Peer> Nic::peer(const std::string& path, pid_t pid) {
  std::lock_guard<std::mutex> lock(peers_mu_);
  auto& slot = peers_[path];
  if (!slot) {
    slot = std::make_shared<Peer>();
    slot->path = path;
    slot->pid = pid;
  }
  return slot;
}

// ---------------------------------------------------------------- faults ---
ibv_wc_status Nic::on_send_posted() {
  uint64_t n = sends_posted_.fetch_add(1) + 1;
  if (fault_link_down_after_ != 0 && n == fault_link_down_after_ + 1) {
    post([this] { link_down(); });
  }
  if (fault_wc_error_at_ != 0 && n == fault_wc_error_at_) return fault_wc_status_;
  return IBV_WC_SUCCESS;
}

void Nic::port_down_after(const std::shared_ptr<Context>& context, long ms) {
  std::weak_ptr<Context> weak = context;
  post([this, weak, ms] {
    after(std::chrono::milliseconds(ms), [this, weak] {
      if (auto c = weak.lock()) port_down(c);
    });
  });
}

void Nic::port_down(const std::shared_ptr<Context>& context) {
  for (size_t p = 1; p <= context->info().ports.size(); ++p) {
    context->port_down[p - 1] = true;
    write_port_state(context->info(), static_cast<int>(p), false);
    ibv_async_event event{};
    event.event_type = IBV_EVENT_PORT_ERR;
    event.element.port_num = static_cast<int>(p);
    context->queue_event(event);
  }
  for (auto& qp : all_qps()) {
    if (qp->context != context) continue;
    if (qp->type == QpType::kSrd) {
      kick(*qp);
      continue;
    }
    std::lock_guard<std::mutex> lock(qp->mu);
    if (qp->state == IBV_QPS_RTS && !qp->sq.empty()) schedule_fail(*qp);
  }
}

void Nic::link_down() {
  if (link_is_down_) return;
  link_is_down_ = true;
  // Peers see their connections end, and nobody can connect any more.
  epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, listen_fd_, nullptr);
  close(listen_fd_);
  listen_fd_ = -1;
  unlink(path_.c_str());
  for (auto& conn : conns_) close_conn(*conn);
  for (auto& qp : all_qps()) {
    if (qp->type == QpType::kSrd) {
      kick(*qp);  // its WRs fail after the retry time, the QP stays in RTS
      continue;
    }
    std::lock_guard<std::mutex> lock(qp->mu);
    qp->broken = true;
    if (qp->state == IBV_QPS_RTS && !qp->sq.empty()) schedule_fail(*qp);
  }
}

// ----------------------------------------------------------- connections ---
void Nic::accept_all() {
  while (true) {
    int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR) continue;
      return;
    }
    if (link_is_down_) {
      close(fd);
      continue;
    }
    auto conn = std::make_unique<Conn>();
    conn->fd = fd;
    epoll_set(epoll_fd_, EPOLL_CTL_ADD, fd, EPOLLIN, conn.get());
    conns_.push_back(std::move(conn));
  }
}

Conn* Nic::connect_peer(const std::shared_ptr<Peer>& peer) {
  if (peer->conn != nullptr) return peer->conn;
  if (peer->dead || link_is_down_) return nullptr;
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (peer->path.size() >= sizeof(addr.sun_path)) {
    peer_lost(*peer);
    return nullptr;
  }
  std::memcpy(addr.sun_path, peer->path.c_str(), peer->path.size() + 1);
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return nullptr;
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    int e = errno;
    close(fd);
    if (e == EAGAIN || e == EINTR) {
      // The peer's backlog is full: try again shortly.
      if (!peer->connect_scheduled) {
        peer->connect_scheduled = true;
        after(std::chrono::milliseconds(2), [this, peer] {
          peer->connect_scheduled = false;
          wake_waiting(*peer);
        });
      }
      return nullptr;
    }
    peer_lost(*peer);
    return nullptr;
  }
  auto conn = std::make_unique<Conn>();
  conn->fd = fd;
  conn->outgoing = true;
  conn->peer = peer;
  epoll_set(epoll_fd_, EPOLL_CTL_ADD, fd, EPOLLIN, conn.get());
  Conn* raw = conn.get();
  conns_.push_back(std::move(conn));
  peer->conn = raw;
  Frame hello{};
  hello.type = kHello;
  hello.imm = static_cast<uint32_t>(getpid());
  hello.payload = path_.size();
  queue(*raw, hello, path_.data(), path_.size(), nullptr);
  return raw;
}

void Nic::close_conn(Conn& conn) {
  if (conn.closed) return;
  conn.closed = true;
  epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, conn.fd, nullptr);
  close(conn.fd);
  conn.fd = -1;
  conn.out.clear();
  conn.out_bytes = 0;
  conn.sink.clear();
  conn.qp.reset();
  conn.recv = RecvWr();
  if (conn.peer) {
    if (conn.peer->conn == &conn) conn.peer->conn = nullptr;
    peer_lost(*conn.peer);
  }
}

// The peer process is gone (or this process's link went down): its QPs with
// work fail after the retry time, like a requester that runs out of retries.
void Nic::peer_lost(Peer& peer) {
  if (peer.dead.exchange(true)) return;
  // What the peer wrote before it went is still in our socket: the acks of
  // requests it executed. A real requester had those acks before the link
  // went quiet, so read them before closing (the other connection's EOF may
  // be seen first).
  if (peer.conn != nullptr && !peer.conn->closed) on_readable(*peer.conn);
  if (peer.conn != nullptr) close_conn(*peer.conn);
  for (auto& qp : all_qps()) {
    if (qp->type == QpType::kSrd) {
      kick(*qp);  // its WRs to that peer fail
      continue;
    }
    std::lock_guard<std::mutex> lock(qp->mu);
    if (qp->peer.get() != &peer) continue;
    qp->broken = true;
    if (qp->state == IBV_QPS_RTS && !qp->sq.empty()) schedule_fail(*qp);
  }
  wake_waiting(peer);
}

void Nic::wake_waiting(Peer& peer) {
  std::vector<std::weak_ptr<Qp>> waiting;
  waiting.swap(peer.waiting);
  for (auto& weak : waiting) {
    if (auto qp = weak.lock()) kick(*qp);
  }
}

// ---------------------------------------------------------------- output ---
void append(Conn& conn, const void* data, size_t len, const std::shared_ptr<Mr>* keep) {
  if (len == 0) return;
  const char* p = static_cast<const char*>(data);
  if (len <= kCopyLimit || keep == nullptr) {
    if (conn.out.empty() || conn.out.back().external != nullptr ||
        conn.out.back().owned.size() >= kChunk) {
      conn.out.emplace_back();
      conn.out.back().owned.reserve(std::max(len, size_t{4096}));
    }
    std::vector<char>& owned = conn.out.back().owned;
    owned.insert(owned.end(), p, p + len);
  } else {
    OutChunk chunk;
    chunk.external = p;
    chunk.external_length = len;
    chunk.keep = *keep;
    conn.out.push_back(std::move(chunk));
  }
  conn.out_bytes += len;
}

void Nic::queue(Conn& conn, const Frame& frame, const char* payload, size_t len,
                const std::shared_ptr<Mr>& keep) {
  if (conn.closed) return;
  if (frame.type != kHello) count(kPacketsSent);
  append(conn, &frame, sizeof(frame), nullptr);
  append(conn, payload, len, keep ? &keep : nullptr);
  if (!conn.dirty) {
    conn.dirty = true;
    dirty_.push_back(&conn);
  }
}

void Nic::flush(Conn& conn) {
  while (!conn.out.empty()) {
    iovec iov[kMaxIov];
    int n = 0;
    for (const OutChunk& chunk : conn.out) {
      if (n == kMaxIov) break;
      iov[n].iov_base = const_cast<char*>(chunk.data());
      iov[n].iov_len = chunk.left();
      ++n;
    }
    msghdr msg{};
    msg.msg_iov = iov;
    msg.msg_iovlen = static_cast<size_t>(n);
    ssize_t w = sendmsg(conn.fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (w < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) {
        if (!conn.want_out) {
          conn.want_out = true;
          epoll_set(epoll_fd_, EPOLL_CTL_MOD, conn.fd, EPOLLIN | EPOLLOUT, &conn);
        }
        return;
      }
      close_conn(conn);
      return;
    }
    size_t left = static_cast<size_t>(w);
    conn.out_bytes -= left;
    while (left > 0) {
      OutChunk& chunk = conn.out.front();
      size_t take = std::min(left, chunk.left());
      chunk.offset += take;
      left -= take;
      if (chunk.left() == 0) conn.out.pop_front();
    }
  }
  if (conn.want_out) {
    conn.want_out = false;
    epoll_set(epoll_fd_, EPOLL_CTL_MOD, conn.fd, EPOLLIN, &conn);
  }
  if (conn.outgoing && conn.peer && !conn.peer->waiting.empty()) wake_waiting(*conn.peer);
}

// ----------------------------------------------------------------- input ---
namespace {

void advance_sink(Conn& conn, size_t n) {
  while (n > 0 && conn.sink_index < conn.sink.size()) {
    size_t take = std::min(n, conn.sink[conn.sink_index].len - conn.sink_offset);
    conn.sink_offset += take;
    n -= take;
    if (conn.sink_offset == conn.sink[conn.sink_index].len) {
      ++conn.sink_index;
      conn.sink_offset = 0;
    }
  }
}

void deliver(Conn& conn, const char* src, size_t n) {
  while (n > 0 && conn.sink_index < conn.sink.size()) {
    Piece& piece = conn.sink[conn.sink_index];
    size_t take = std::min(n, piece.len - conn.sink_offset);
    std::memcpy(piece.ptr + conn.sink_offset, src, take);
    src += take;
    n -= take;
    advance_sink(conn, take);
  }
}

}  // namespace

void Nic::on_readable(Conn& conn) {
  size_t budget = 16 << 20;  // then let other connections in
  while (!conn.closed && budget > 0) {
    bool direct = conn.payload_left >= kDirectRead && conn.in_head == conn.in_tail &&
                  conn.sink_index < conn.sink.size();
    ssize_t r;
    if (direct) {
      iovec iov[kMaxIov];
      int n = 0;
      uint64_t want = conn.payload_left;
      size_t index = conn.sink_index;
      size_t offset = conn.sink_offset;
      while (n < kMaxIov && index < conn.sink.size() && want > 0) {
        size_t len = std::min<uint64_t>(conn.sink[index].len - offset, want);
        iov[n].iov_base = conn.sink[index].ptr + offset;
        iov[n].iov_len = len;
        ++n;
        want -= len;
        ++index;
        offset = 0;
      }
      r = readv(conn.fd, iov, n);
    } else {
      if (conn.in_head == conn.in_tail) {
        conn.in_head = conn.in_tail = 0;
      } else if (conn.in_tail == conn.in.size()) {
        std::memmove(conn.in.data(), conn.in.data() + conn.in_head, conn.in_tail - conn.in_head);
        conn.in_tail -= conn.in_head;
        conn.in_head = 0;
      }
      r = read(conn.fd, conn.in.data() + conn.in_tail, conn.in.size() - conn.in_tail);
    }
    if (r == 0) {
      close_conn(conn);
      return;
    }
    if (r < 0) {
      if (errno == EINTR) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK) close_conn(conn);
      return;
    }
    budget -= std::min(budget, static_cast<size_t>(r));
    if (direct) {
      advance_sink(conn, static_cast<size_t>(r));
      conn.payload_left -= static_cast<uint64_t>(r);
      if (conn.payload_left == 0) finish_payload(conn);
      continue;
    }
    conn.in_tail += static_cast<size_t>(r);
    // Consume whole frames and payload bytes from the buffer.
    while (!conn.closed) {
      size_t avail = conn.in_tail - conn.in_head;
      if (conn.payload_left > 0) {
        if (avail == 0) break;
        size_t n = std::min<uint64_t>(avail, conn.payload_left);
        deliver(conn, conn.in.data() + conn.in_head, n);
        conn.in_head += n;
        conn.payload_left -= n;
        if (conn.payload_left == 0) finish_payload(conn);
        continue;
      }
      if (avail < sizeof(Frame)) break;
      Frame frame;
      std::memcpy(&frame, conn.in.data() + conn.in_head, sizeof(frame));
      conn.in_head += sizeof(frame);
      on_frame(conn, frame);
      if (!conn.closed && conn.payload_left == 0) finish_payload(conn);
    }
  }
}

void Nic::on_frame(Conn& conn, const Frame& frame) {
  conn.frame = frame;
  conn.payload_left = frame.payload;
  conn.sink.clear();
  conn.sink_index = 0;
  conn.sink_offset = 0;
  conn.done = Conn::Done::kNone;
  switch (frame.type) {
    case kHello:
      if (conn.outgoing || frame.payload > 4096) {
        close_conn(conn);
        return;
      }
      conn.hello.assign(frame.payload, '\0');
      conn.sink.push_back(Piece{conn.hello.data(), conn.hello.size(), nullptr});
      conn.done = Conn::Done::kHello;
      return;
    case kRequest:
      count(kPacketsReceived);
      if (conn.outgoing) return;  // requests only flow towards the acceptor
      on_request(conn, frame);
      return;
    case kResponse:
      count(kPacketsReceived);
      if (!conn.outgoing) return;
      if (conn.peer) conn.peer->answered = true;
      on_response(conn, frame);
      return;
    default:
      close_conn(conn);
      return;
  }
}

void Nic::finish_payload(Conn& conn) {
  Conn::Done done = conn.done;
  conn.done = Conn::Done::kNone;
  conn.sink.clear();
  conn.sink_index = 0;
  conn.sink_offset = 0;
  switch (done) {
    case Conn::Done::kNone:
      return;
    case Conn::Done::kHello:
      conn.peer = peer(conn.hello, static_cast<pid_t>(conn.frame.imm));
      return;
    case Conn::Done::kRequest: {
      std::shared_ptr<Qp> qp = std::move(conn.qp);
      const Frame& f = conn.frame;
      if (conn.with_recv || conn.unsolicited) {
        std::lock_guard<std::mutex> lock(qp->mu);
        if (!qp->destroyed) {
          ibv_wc wc{};
          wc.wr_id = conn.recv.wr_id;
          wc.status = IBV_WC_SUCCESS;
          wc.byte_len = static_cast<uint32_t>(f.length);
          wc.qp_num = qp->qpn;
          wc.src_qp = f.req_qpn;
          wc.slid = qp->context->info().ib ? qp->ah.dlid : 0;
          if (f.op == IBV_WR_RDMA_WRITE_WITH_IMM) {
            wc.opcode = IBV_WC_RECV_RDMA_WITH_IMM;
          } else {
            wc.opcode = IBV_WC_RECV;
          }
          if (f.op != IBV_WR_SEND) {
            wc.wc_flags = IBV_WC_WITH_IMM;
            wc.imm_data = f.imm;
          }
          Cqe cqe;
          cqe.wc = wc;
          cqe.qp = qp.get();
          cqe.retired = &qp->rq_retired;
          cqe.index = conn.recv.index;
          if (qp->type == QpType::kSrd) {
            trace("SRD QP %u <- %u: op %d psn %u len %llu wr_id %#llx", qp->qpn, f.req_qpn,
                  static_cast<int>(f.op), f.psn, static_cast<unsigned long long>(f.length),
                  static_cast<unsigned long long>(wc.wr_id));
            // The receiver's AH number for the sender, 0xffff when it has none
            // (then the GID tells who sent it).
            std::memcpy(cqe.sgid.raw, f.sgid, 16);
            cqe.wc.slid = qp->pd->ahn_of(cqe.sgid);
            cqe.unordered = true;
            if (conn.unsolicited) {
              cqe.wc.wr_id = 0;
              cqe.unsolicited = true;
              cqe.retired = nullptr;
            }
          }
          qp->recv_cq->push(cqe);
        }
        conn.recv = RecvWr();
        conn.unsolicited = false;
      }
      respond(conn, f, kAck);
      return;
    }
    case Conn::Done::kRead: {
      std::shared_ptr<Qp> qp = std::move(conn.qp);
      std::lock_guard<std::mutex> lock(qp->mu);
      if (qp->type == QpType::kSrd) {
        finish_read_srd(conn, *qp);
        return;
      }
      if (qp->destroyed || qp->state != IBV_QPS_RTS || qp->sq.empty() || qp->send_next == 0 ||
          qp->sq.front().psn != conn.frame.psn) {
        return;
      }
      complete_head(*qp);
      pump_locked(*qp, &conn);
      return;
    }
  }
}

void Nic::respond(Conn& conn, const Frame& request, uint8_t code, uint8_t rnr_timer) {
  Frame r{};
  r.type = kResponse;
  r.op = code;
  r.req_qpn = request.req_qpn;
  r.resp_qpn = request.resp_qpn;
  r.psn = request.psn;
  r.rnr_timer = rnr_timer;
  queue(conn, r, nullptr, 0, nullptr);
}

// ---------------------------------------------------------------- target ---
void Nic::on_request(Conn& conn, const Frame& f) {
  auto drop = [&](const char* why) {
    log("drop: QP %u -> %u psn %u: %s", f.req_qpn, f.resp_qpn, f.psn, why);
    respond(conn, f, kDropped);
  };
  std::shared_ptr<Qp> qp = find_qp(f.resp_qpn);
  if (!qp) {
    drop("no such QP");
    return;
  }
  std::unique_lock<std::mutex> lock(qp->mu);
  // What a real target silently drops (wrong QP, wrong state, port down, not
  // connected to this requester) makes the requester time out.
  if (qp->destroyed) {
    drop("QP destroyed");
  } else if (qp->state != IBV_QPS_RTR && qp->state != IBV_QPS_RTS) {
    drop(qp->state == IBV_QPS_ERR ? "QP in ERR" : "QP not yet in RTR");
  } else if (link_is_down_ || qp->context->is_port_down(qp->port)) {
    drop("link or port down");
  } else if (f.port != qp->port) {
    drop("addressed to another port");
  } else if (qp->type == QpType::kSrd) {
    execute_srd(conn, f, qp, lock);
  } else if (qp->dest_qpn != f.req_qpn || !conn.peer || qp->peer != conn.peer) {
    drop("QP connected to another requester");
  } else if (f.psn != qp->expected_psn) {
    // After a NAK the target ignores everything until the retransmission.
    if (!qp->nak_outstanding) drop("unexpected PSN");
  } else {
    execute(conn, f, qp, lock);
  }
}

// The request is in sequence for a connected QP (qp->mu held by `lock`).
void Nic::execute(Conn& conn, const Frame& f, const std::shared_ptr<Qp>& qp,
                  std::unique_lock<std::mutex>& lock) {
  const auto op = static_cast<ibv_wr_opcode>(f.op);
  bool consumes =
      op == IBV_WR_SEND || op == IBV_WR_SEND_WITH_IMM || op == IBV_WR_RDMA_WRITE_WITH_IMM;
  bool is_write = op == IBV_WR_RDMA_WRITE || op == IBV_WR_RDMA_WRITE_WITH_IMM;
  bool is_read = op == IBV_WR_RDMA_READ;
  if (!consumes && !is_write && !is_read) {
    respond(conn, f, kInvalidNak);
    enter_error(*qp);
    return;
  }
  if (consumes) {
    bool forced = false;
    if (fault_rnr_left_.load() > 0 && fault_rnr_left_.fetch_sub(1) > 0) forced = true;
    if (forced || qp->rq.empty()) {
      count(kRnrNaksSent);
      qp->nak_outstanding = true;
      respond(conn, f, kRnrNak, qp->min_rnr_timer);
      return;
    }
  }
  std::shared_ptr<Mr> mr;
  char* target = nullptr;
  if (is_write || is_read) {
    unsigned need = is_read ? IBV_ACCESS_REMOTE_READ : IBV_ACCESS_REMOTE_WRITE;
    bool ok = (qp->access & need) != 0;
    if (ok && f.length > 0) {  // zero-length transfers carry no usable rkey
      mr = find_rkey(f.rkey);
      ok = mr && mr->pd == qp->pd && (mr->access & static_cast<int>(need)) != 0 &&
           (target = mr->translate(f.remote_addr, f.length)) != nullptr;
    }
    if (!ok) {
      respond(conn, f, kAccessNak);
      enter_error(*qp);
      ibv_async_event event{};
      event.event_type = IBV_EVENT_QP_ACCESS_ERR;
      event.element.qp = &qp->handle.verbs;
      qp->context->queue_event(event);
      return;
    }
  }
  RecvWr recv;
  if (consumes) {
    recv = std::move(qp->rq.front());
    qp->rq.pop_front();
    bool is_send = !is_write;
    if (recv.preset != IBV_WC_SUCCESS || (is_send && f.length > recv.capacity)) {
      ibv_wc_status status = recv.preset != IBV_WC_SUCCESS ? recv.preset : IBV_WC_LOC_LEN_ERR;
      push_recv_cqe(*qp, recv, status);
      enter_error(*qp);
      respond(conn, f, status == IBV_WC_LOC_LEN_ERR ? kInvalidNak : kOperationalNak);
      return;
    }
  }
  qp->expected_psn = (qp->expected_psn + 1) & 0xffffff;
  qp->nak_outstanding = false;
  land_request(conn, f, qp, lock, target, std::move(mr), std::move(recv), consumes);
}

// An accepted request, RC or SRD: a read is answered at once (the lock is
// released first); a write or send is received into its sink.
void Nic::land_request(Conn& conn, const Frame& f, const std::shared_ptr<Qp>& qp,
                       std::unique_lock<std::mutex>& lock, char* target, std::shared_ptr<Mr> mr,
                       RecvWr recv, bool consumes) {
  const auto op = static_cast<ibv_wr_opcode>(f.op);
  bool is_write = op == IBV_WR_RDMA_WRITE || op == IBV_WR_RDMA_WRITE_WITH_IMM;
  if (op == IBV_WR_RDMA_READ) {
    lock.unlock();
    Frame r{};
    r.type = kResponse;
    r.op = kReadResponse;
    r.req_qpn = f.req_qpn;
    r.resp_qpn = f.resp_qpn;
    r.psn = f.psn;
    r.length = f.length;
    r.payload = f.length;
    queue(conn, r, target, f.length, mr);
    return;
  }
  conn.qp = qp;
  conn.with_recv = consumes;
  conn.done = Conn::Done::kRequest;
  if (is_write) {
    if (f.length > 0) conn.sink.push_back(Piece{target, f.length, mr});
  } else {
    uint64_t left = f.length;
    for (const Piece& piece : recv.pieces) {
      if (left == 0) break;
      size_t take = std::min<uint64_t>(piece.len, left);
      conn.sink.push_back(Piece{piece.ptr, take, piece.mr});
      left -= take;
    }
  }
  conn.recv = std::move(recv);
}

// ------------------------------------------------------------- requester ---
bool Nic::blocked(Qp& qp) {
  return qp.unreachable || qp.broken || !qp.peer || qp.peer->dead || link_is_down_ ||
         qp.context->is_port_down(qp.port);
}

void Nic::schedule_fail(Qp& qp) {
  if (qp.fail_scheduled) return;
  qp.fail_scheduled = true;
  std::weak_ptr<Qp> weak = qp.weak_from_this();
  after(retry_, [this, weak] {
    auto q = weak.lock();
    if (!q) return;
    std::lock_guard<std::mutex> lock(q->mu);
    q->fail_scheduled = false;
    if (!q->destroyed && q->state == IBV_QPS_RTS && !q->sq.empty() && blocked(*q)) {
      fail_head(*q, IBV_WC_RETRY_EXC_ERR);
    }
  });
}

void Nic::schedule_resume(Qp& qp) {
  std::weak_ptr<Qp> weak = qp.weak_from_this();
  after(qp.resume_at - Clock::now(), [this, weak] {
    if (auto q = weak.lock()) kick(*q);
  });
}

// Puts a request frame and its payload (none, inline, or the WR's pieces)
// on the connection.
void Nic::send_request(Conn& conn, const Frame& f, const SendWr& wr) {
  if (f.payload == 0) {
    queue(conn, f, nullptr, 0, nullptr);
  } else if (!wr.inline_data.empty()) {
    queue(conn, f, wr.inline_data.data(), wr.inline_data.size(), nullptr);
  } else {
    queue(conn, f, nullptr, 0, nullptr);
    for (const Piece& piece : wr.pieces) {
      append(conn, piece.ptr, piece.len, piece.mr ? &piece.mr : nullptr);
    }
  }
}

void Nic::complete_head(Qp& qp) {
  SendWr& head = qp.sq.front();
  count_completed_bytes(head);
  if (head.signaled) push_send_cqe(qp, head, IBV_WC_SUCCESS);
  qp.sq.pop_front();
  if (qp.send_next > 0) --qp.send_next;
}

void Nic::fail_head(Qp& qp, ibv_wc_status status) {
  push_send_cqe(qp, qp.sq.front(), status);
  qp.sq.pop_front();
  qp.send_next = 0;
  enter_error(qp);
}

void Nic::pump(const std::shared_ptr<Qp>& qp) {
  if (qp->type == QpType::kSrd) {
    pump_srd(qp);
    return;
  }
  std::shared_ptr<Peer> peer;
  bool block = false;
  {
    std::lock_guard<std::mutex> lock(qp->mu);
    if (qp->destroyed || (qp->state != IBV_QPS_RTR && qp->state != IBV_QPS_RTS)) return;
    peer = qp->peer;
    block = blocked(*qp);
  }
  // Connect eagerly (at RTR) so that a vanished peer is noticed. Not under
  // the QP lock: a failed connect fails QPs.
  Conn* conn = nullptr;
  if (peer && !block) conn = connect_peer(peer);
  std::lock_guard<std::mutex> lock(qp->mu);
  if (qp->peer != peer) return;  // reconnected meanwhile; a newer kick follows
  pump_locked(*qp, conn);
}

void Nic::pump_locked(Qp& qp, Conn* conn) {
  if (qp.type == QpType::kSrd) {
    pump_srd_locked(qp);
    return;
  }
  if (qp.destroyed || qp.state != IBV_QPS_RTS || qp.sq.empty()) return;
  if (blocked(qp)) {
    schedule_fail(qp);
    return;
  }
  auto now = Clock::now();
  SendWr& head = qp.sq.front();
  if (head.dropping && now >= head.drop_since + retry_) {
    fail_head(qp, IBV_WC_RETRY_EXC_ERR);
    return;
  }
  if (now < qp.resume_at) return;  // a resume timer is pending
  if (qp.send_next == 0 && head.preset != IBV_WC_SUCCESS) {
    fail_head(qp, head.preset);
    return;
  }
  if (conn == nullptr || conn->closed) {
    qp.peer->waiting.push_back(qp.weak_from_this());
    return;
  }
  while (qp.send_next < qp.sq.size()) {
    if (conn->out_bytes >= kOutLimit) {
      qp.peer->waiting.push_back(qp.weak_from_this());
      return;
    }
    SendWr& wr = qp.sq[qp.send_next];
    if (wr.preset != IBV_WC_SUCCESS) return;  // fails once it is the head
    Frame f{};
    f.type = kRequest;
    f.op = static_cast<uint8_t>(wr.opcode);
    f.port = qp.peer_port;
    f.req_qpn = qp.qpn;
    f.resp_qpn = qp.dest_qpn;
    f.psn = wr.psn;
    f.imm = wr.imm;
    f.rkey = wr.rkey;
    f.remote_addr = wr.remote_addr;
    f.length = wr.length;
    f.payload = wr.opcode == IBV_WR_RDMA_READ ? 0 : wr.length;
    if (wr.rnr_tries > 0 || wr.dropping) count(kRetransmits);
    send_request(*conn, f, wr);
    ++qp.send_next;
  }
}

void Nic::on_response(Conn& conn, const Frame& f) {
  std::shared_ptr<Qp> qp = find_qp(f.req_qpn);
  if (!qp) return;
  {
    std::lock_guard<std::mutex> lock(qp->mu);
    if (qp->type == QpType::kSrd) {
      on_response_srd(conn, f, *qp);
      return;
    }
    // Anything but the answer to the oldest outstanding WR is stale.
    if (qp->destroyed || qp->state != IBV_QPS_RTS || qp->sq.empty() || qp->send_next == 0 ||
        qp->sq.front().psn != f.psn || qp->peer != conn.peer) {
      return;
    }
    SendWr& head = qp->sq.front();
    auto now = Clock::now();
    switch (f.op) {
      case kAck:
        if (head.opcode == IBV_WR_RDMA_READ) return;
        complete_head(*qp);
        pump_locked(*qp, &conn);  // a failed WR may now be the head
        break;
      case kReadResponse:
        if (head.opcode != IBV_WR_RDMA_READ || f.payload != head.length) return;
        conn.sink = head.pieces;
        conn.qp = qp;
        conn.done = Conn::Done::kRead;
        break;
      case kRnrNak:
        count(kRnrNaksReceived);
        if (qp->rnr_retry != 7 && head.rnr_tries >= qp->rnr_retry) {
          fail_head(*qp, IBV_WC_RNR_RETRY_EXC_ERR);
        } else {
          ++head.rnr_tries;
          qp->send_next = 0;
          qp->resume_at = now + std::chrono::microseconds(kRnrMicros[f.rnr_timer & 31]);
          schedule_resume(*qp);
        }
        break;
      case kDropped:
        if (!head.dropping) {
          head.dropping = true;
          head.drop_since = now;
        }
        if (now >= head.drop_since + retry_) {
          fail_head(*qp, IBV_WC_RETRY_EXC_ERR);
        } else {
          qp->send_next = 0;
          auto step = std::max<Clock::duration>(retry_ / 8, std::chrono::milliseconds(1));
          qp->resume_at = now + std::min<Clock::duration>(step, head.drop_since + retry_ - now);
          schedule_resume(*qp);
        }
        break;
      case kAccessNak:
        fail_head(*qp, IBV_WC_REM_ACCESS_ERR);
        break;
      case kInvalidNak:
        fail_head(*qp, IBV_WC_REM_INV_REQ_ERR);
        break;
      case kOperationalNak:
        fail_head(*qp, IBV_WC_REM_OP_ERR);
        break;
      default:
        break;
    }
  }
}

}  // namespace softverbs
