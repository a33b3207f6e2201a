// SRD, the transport of EFA devices: connectionless (every WR names its
// destination QP and Q_Key), reliable (the NIC retries until the target
// answers or the retry time runs out) and unordered (WRs are answered and
// completed each on its own; completions may overtake older ones). An SRD QP
// never goes to ERR on a remote error: the WR completes with an error status
// and an EFA status as vendor error, and the QP carries on.

#include <algorithm>
#include <cstring>

#include "completion.h"
#include "context.h"
#include "counters.h"
#include "env.h"
#include "nic.h"
#include "process.h"
#include "queue_pair.h"
#include "registry.h"
#include "wire.h"

namespace softverbs {

namespace {

// EFA completion statuses (the vendor error of a failed WR).
constexpr uint32_t kEfaUnsupportedOp = 3;
constexpr uint32_t kEfaRemoteBadAddress = 7;
constexpr uint32_t kEfaRnr = 10;
constexpr uint32_t kEfaRemoteBadLength = 11;
constexpr uint32_t kEfaRemoteBadStatus = 12;
constexpr uint32_t kEfaUnresponsive = 13;
constexpr uint32_t kEfaUnreachable = 15;

}  // namespace

void Nic::forget_srd(uint32_t qpn) {
  std::lock_guard<std::mutex> lock(peers_mu_);
  srd_routes_.erase(qpn);
}

void Nic::resolve_srd(uint32_t qpn, const ibv_gid& gid, SrdDest* out) {
  out->qpn = qpn;
  out->gid = gid;
  out->peer.reset();
  out->port = 0;
  auto pick = [&](const SrdRoute& route) {
    for (const auto& [port, g] : route.ports) {
      if (std::memcmp(g.raw, gid.raw, 16) == 0) {
        out->peer = route.peer;
        out->port = port;
        return;
      }
    }
  };
  {
    std::lock_guard<std::mutex> lock(peers_mu_);
    auto it = srd_routes_.find(qpn);
    if (it != srd_routes_.end() && !it->second.peer->dead) {
      pick(it->second);
      return;
    }
  }
  // QP numbers of a dead process may be reused: read the registry again.
  RemoteQp remote;
  if (!registry_read_qp(qpn, &remote) || !pid_alive(remote.pid)) {
    log("SRD address: no live QP %u", qpn);
    return;
  }
  SrdRoute route;
  route.peer = peer(remote.nic, remote.pid);
  for (const RemotePort& port : remote.ports) {
    for (const ibv_gid& g : port.gids) route.ports.emplace_back(static_cast<uint8_t>(port.port), g);
  }
  pick(route);
  if (!out->peer) log("SRD address: QP %u has no port with the AH's GID", qpn);
  std::lock_guard<std::mutex> lock(peers_mu_);
  srd_routes_[qpn] = std::move(route);
}

void Nic::kick_after(Qp& qp, Clock::duration delay) {
  std::weak_ptr<Qp> weak = qp.weak_from_this();
  after(delay, [this, weak] {
    if (auto q = weak.lock()) kick(*q);
  });
}

void Nic::pump_srd(const std::shared_ptr<Qp>& qp) {
  // Connect to the peers of WRs still to send, without the QP lock (a failed
  // connect marks the peer dead and kicks QPs).
  std::vector<std::shared_ptr<Peer>> peers;
  {
    std::lock_guard<std::mutex> lock(qp->mu);
    if (qp->destroyed || qp->state != IBV_QPS_RTS) return;
    for (const SendWr& wr : qp->sq) {
      const auto& p = wr.dest.peer;
      if (wr.sent || !p || p->dead || p->conn != nullptr) continue;
      if (std::find(peers.begin(), peers.end(), p) == peers.end()) peers.push_back(p);
    }
  }
  for (auto& p : peers) connect_peer(p);
  std::lock_guard<std::mutex> lock(qp->mu);
  pump_srd_locked(*qp);
}

void Nic::pump_srd_locked(Qp& qp) {
  if (qp.destroyed || qp.state != IBV_QPS_RTS || qp.sq.empty()) return;
  auto now = Clock::now();
  bool down = link_is_down_ || qp.context->is_port_down(qp.port);
  bool reconnect = false;
  const ibv_gid& sgid = qp.context->info().ports[qp.port - 1].gids[0].gid;
  for (size_t i = 0; i < qp.sq.size();) {
    SendWr& wr = qp.sq[i];
    if (wr.preset != IBV_WC_SUCCESS) {
      fail_srd(qp, i, wr.preset, wr.preset_vendor);
      continue;
    }
    const std::shared_ptr<Peer>& peer = wr.dest.peer;
    if (down || !peer || peer->dead) {
      // Nobody answers: the device retries until it gives up.
      if (!wr.dropping) {
        wr.dropping = true;
        wr.drop_since = now;
        kick_after(qp, retry_);
      }
      if (now >= wr.drop_since + retry_) {
        fail_srd(qp, i, IBV_WC_RETRY_EXC_ERR,
                 peer && peer->answered ? kEfaUnresponsive : kEfaUnreachable);
        continue;
      }
      ++i;
      continue;
    }
    if (wr.dropping && now >= wr.drop_since + retry_) {
      fail_srd(qp, i, IBV_WC_RETRY_EXC_ERR, peer->answered ? kEfaUnresponsive : kEfaUnreachable);
      continue;
    }
    if (wr.sent || now < wr.not_before) {
      ++i;
      continue;
    }
    Conn* conn = peer->conn;
    if (conn == nullptr || conn->closed) {
      if (peer->connect_scheduled) {
        peer->waiting.push_back(qp.weak_from_this());  // a connect retry wakes it
      } else {
        reconnect = true;  // pump_srd connects, outside this lock
      }
      ++i;
      continue;
    }
    if (conn->out_bytes >= kOutLimit) {
      peer->waiting.push_back(qp.weak_from_this());
      ++i;
      continue;
    }
    Frame f{};
    f.type = kRequest;
    f.op = static_cast<uint8_t>(wr.opcode);
    f.port = wr.dest.port;
    f.req_qpn = qp.qpn;
    f.resp_qpn = wr.dest.qpn;
    f.psn = wr.psn;
    f.imm = wr.imm;
    f.rkey = wr.rkey;
    f.remote_addr = wr.remote_addr;
    f.length = wr.length;
    f.payload = wr.opcode == IBV_WR_RDMA_READ ? 0 : wr.length;
    f.qkey = wr.dest.qkey;
    std::memcpy(f.sgid, sgid.raw, 16);
    if (wr.rnr_tries > 0 || wr.dropping) count(kRetransmits);
    trace("SRD QP %u -> %u: op %d psn %u len %llu pieces %zu (first %zu) inline %zu", qp.qpn,
          wr.dest.qpn, static_cast<int>(wr.opcode), wr.psn,
          static_cast<unsigned long long>(wr.length), wr.pieces.size(),
          wr.pieces.empty() ? size_t{0} : wr.pieces[0].len, wr.inline_data.size());
    send_request(*conn, f, wr);
    wr.sent = true;
    ++i;
  }
  if (reconnect) kick(qp);
}

void Nic::complete_srd(Qp& qp, size_t index) {
  SendWr& wr = qp.sq[index];
  count_completed_bytes(wr);
  if (wr.signaled) {
    push_srd_send_cqe(qp, wr, IBV_WC_SUCCESS, 0);
  } else {
    qp.sq_retired.fetch_add(1, std::memory_order_acq_rel);  // no entry will free its slot
  }
  qp.sq.erase(qp.sq.begin() + static_cast<std::ptrdiff_t>(index));
}

void Nic::fail_srd(Qp& qp, size_t index, ibv_wc_status status, uint32_t vendor_err) {
  push_srd_send_cqe(qp, qp.sq[index], status, vendor_err);
  qp.sq.erase(qp.sq.begin() + static_cast<std::ptrdiff_t>(index));
}

// The target side of an SRD request (qp->mu held by `lock`).
void Nic::execute_srd(Conn& conn, const Frame& f, const std::shared_ptr<Qp>& qp,
                      std::unique_lock<std::mutex>& lock) {
  const auto op = static_cast<ibv_wr_opcode>(f.op);
  const EfaCaps& caps = qp->context->info().efa_caps;
  bool is_send = op == IBV_WR_SEND || op == IBV_WR_SEND_WITH_IMM;
  bool is_write = op == IBV_WR_RDMA_WRITE || op == IBV_WR_RDMA_WRITE_WITH_IMM;
  bool is_read = op == IBV_WR_RDMA_READ;
  bool unsolicited = op == IBV_WR_RDMA_WRITE_WITH_IMM && qp->unsolicited_write_recv;
  bool consumes = is_send || (op == IBV_WR_RDMA_WRITE_WITH_IMM && !unsolicited);
  if (f.qkey != qp->qkey) {
    log("drop: QP %u -> %u psn %u: Q_Key mismatch", f.req_qpn, f.resp_qpn, f.psn);
    respond(conn, f, kDropped);
    return;
  }
  if ((!is_send && !is_write && !is_read) || (is_read && !caps.rdma_read) ||
      (is_write && !caps.rdma_write) || (is_send && f.length > qp->context->info().max_msg)) {
    respond(conn, f, kInvalidNak);
    return;
  }
  if (consumes) {
    bool forced = false;
    if (fault_rnr_left_.load() > 0 && fault_rnr_left_.fetch_sub(1) > 0) forced = true;
    if (forced || qp->rq.empty()) {
      count(kRnrNaksSent);
      respond(conn, f, kRnrNak);
      return;
    }
  }
  std::shared_ptr<Mr> mr;
  char* target = nullptr;
  if ((is_write || is_read) && f.length > 0) {
    int need = is_read ? IBV_ACCESS_REMOTE_READ : IBV_ACCESS_REMOTE_WRITE;
    mr = find_rkey(f.rkey);
    if (!mr || mr->pd != qp->pd || (mr->access & need) == 0 ||
        (target = mr->translate(f.remote_addr, f.length)) == nullptr) {
      respond(conn, f, kAccessNak);
      return;
    }
  }
  RecvWr recv;
  if (consumes) {
    recv = std::move(qp->rq.front());
    qp->rq.pop_front();
    if (recv.preset != IBV_WC_SUCCESS || (is_send && f.length > recv.capacity)) {
      ibv_wc_status status = recv.preset != IBV_WC_SUCCESS ? recv.preset : IBV_WC_LOC_LEN_ERR;
      push_recv_cqe(*qp, recv, status);
      respond(conn, f, status == IBV_WC_LOC_LEN_ERR ? kInvalidNak : kOperationalNak);
      return;
    }
  }
  conn.unsolicited = unsolicited;
  land_request(conn, f, qp, lock, target, std::move(mr), std::move(recv), consumes);
}

// The requester side: an answer to one of the QP's outstanding WRs (qp.mu
// held).
void Nic::on_response_srd(Conn& conn, const Frame& f, Qp& qp) {
  if (qp.destroyed || qp.state != IBV_QPS_RTS) return;
  size_t i = 0;
  while (i < qp.sq.size() &&
         !(qp.sq[i].psn == f.psn && qp.sq[i].sent && qp.sq[i].dest.peer == conn.peer)) {
    ++i;
  }
  if (i == qp.sq.size()) return;  // stale
  SendWr& wr = qp.sq[i];
  auto now = Clock::now();
  switch (f.op) {
    case kAck:
      if (wr.opcode == IBV_WR_RDMA_READ) return;
      complete_srd(qp, i);
      break;
    case kReadResponse:
      if (wr.opcode != IBV_WR_RDMA_READ || f.payload != wr.length) return;
      conn.sink = wr.pieces;
      conn.qp = qp.shared_from_this();
      conn.done = Conn::Done::kRead;
      return;
    case kRnrNak: {
      count(kRnrNaksReceived);
      if (qp.rnr_retry != 7 && wr.rnr_tries >= qp.rnr_retry) {
        fail_srd(qp, i, IBV_WC_RNR_RETRY_EXC_ERR, kEfaRnr);
        break;
      }
      ++wr.rnr_tries;
      wr.sent = false;
      auto backoff = std::chrono::microseconds(qp.context->info().efa_caps.rnr_backoff_us);
      wr.not_before = now + backoff;
      kick_after(qp, backoff);
      return;
    }
    case kDropped: {
      wr.sent = false;
      // Read the registry again before the retransmission: a reused number
      // may lead to another process now.
      forget_srd(wr.dest.qpn);
      uint32_t qkey = wr.dest.qkey;
      resolve_srd(wr.dest.qpn, wr.dest.gid, &wr.dest);
      wr.dest.qkey = qkey;
      if (!wr.dropping) {
        wr.dropping = true;
        wr.drop_since = now;
      }
      if (now >= wr.drop_since + retry_) {
        fail_srd(qp, i, IBV_WC_RETRY_EXC_ERR, kEfaUnresponsive);  // its NIC answers
        break;
      }
      auto step = std::max<Clock::duration>(retry_ / 8, std::chrono::milliseconds(1));
      wr.not_before = now + step;
      kick_after(qp, step);
      return;
    }
    case kAccessNak:
      fail_srd(qp, i, IBV_WC_REM_ACCESS_ERR, kEfaRemoteBadAddress);
      break;
    case kInvalidNak:
      fail_srd(qp, i, IBV_WC_REM_INV_REQ_ERR,
               wr.opcode == IBV_WR_SEND || wr.opcode == IBV_WR_SEND_WITH_IMM ? kEfaRemoteBadLength
                                                                             : kEfaUnsupportedOp);
      break;
    case kOperationalNak:
      fail_srd(qp, i, IBV_WC_REM_OP_ERR, kEfaRemoteBadStatus);
      break;
    default:
      return;
  }
  pump_srd_locked(qp);
}

void Nic::finish_read_srd(Conn& conn, Qp& qp) {
  if (qp.destroyed || qp.state != IBV_QPS_RTS) return;
  for (size_t i = 0; i < qp.sq.size(); ++i) {
    if (qp.sq[i].psn == conn.frame.psn && qp.sq[i].sent && qp.sq[i].dest.peer == conn.peer) {
      complete_srd(qp, i);
      pump_srd_locked(qp);
      return;
    }
  }
}

}  // namespace softverbs
