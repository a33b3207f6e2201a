// softverbs libibverbs.so.1: the exported ibv_* API and the context ops
// (post_send, post_recv, poll_cq, req_notify_cq) that rdma-core's inline
// functions call. See softverbs.h for the model and the knobs.
//
// Fidelity notes (where the double knowingly differs from rdma-core):
// - ibv_reg_dmabuf_mr sets mr->addr to the iova (remote addresses and lkey
//   addresses of that MR are iova based, as on hardware).
// - Error statuses of a receive (bad lkey, too short) are reported when a
//   sender's message arrives, as hardware does, not at ibv_post_recv.
// - Closing a device that still has QPs destroys them (their memory stays
//   allocated so stale pointers do not crash).
// - ibv_post_send and ibv_post_recv on a QP in ERR succeed and flush the WRs
//   (as mlx5 does); RESET, INIT and RTR refuse sends with EINVAL.
// - Send and receive queue slots are freed when a completion at or after
//   them is polled (mlx5's accounting; rxe frees them at completion time).
// - One PSN per WR, not per MTU packet.
// - A request the target would silently drop is answered with an explicit
//   frame; the requester retries until SOFTVERBS_RETRY_MS has passed and
//   then fails the WR with IBV_WC_RETRY_EXC_ERR (the QP's timeout and
//   retry_cnt values are accepted but not used). A lost peer process fails
//   only QPs that have (or later get) send WRs, as on hardware.

#include <fcntl.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "internal.h"

namespace softverbs {

// ---------------------------------------------------------------- global ---
namespace {

struct Global {
  std::mutex mu;
  std::vector<std::shared_ptr<Context>> contexts;
  std::unique_ptr<Nic> nic;
  pid_t nic_pid = 0;
  // QPs a closed device still had: kept so that stale pointers stay valid.
  std::vector<std::shared_ptr<Qp>> orphans;
};

Global& global() {
  static Global* g = new Global();  // never destroyed: used at exit
  return *g;
}

void write_counters_file() {
  std::string path = env_string("SOFTVERBS_COUNTERS_FILE", "");
  if (path.empty()) return;
  std::string line = counters_json() + "\n";
  int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) return;
  ssize_t w = write(fd, line.data(), line.size());
  (void)w;
  close(fd);
}

// Runs at exit or unload: no NIC thread, socket or file may outlive the
// library.
struct Finalizer {
  Finalizer() = default;
  Finalizer(const Finalizer&) = delete;
  Finalizer& operator=(const Finalizer&) = delete;
  ~Finalizer() {
    Global& g = global();
    std::lock_guard<std::mutex> lock(g.mu);
    if (g.nic && g.nic_pid == getpid()) {
      log("unloaded with %zu devices open", g.contexts.size());
      write_counters_file();
      for (auto& context : g.contexts) {
        std::lock_guard<std::mutex> clock(context->mu);
        if (!context->closed && context->async_fd >= 0) close(context->async_fd);
        context->closed = true;
        context->async_fd = -1;
      }
      // Stopped but kept: a later static destructor elsewhere may still call
      // ibv_destroy_qp or ibv_close_device on what it holds.
      g.nic->shutdown();
      (void)g.nic.release();
    }
    remove_sysfs();
  }
};

Finalizer g_finalizer;

}  // namespace

// ---------------------------------------------------------------- objects --
Mr::~Mr() {
  if (mapping != nullptr) munmap(mapping, mapping_length);
}

char* Mr::translate(uint64_t address, uint64_t len) const {
  if (address < iova) return nullptr;
  uint64_t offset = address - iova;
  if (offset > length || len > length - offset) return nullptr;
  return base + offset;
}

Channel::~Channel() {
  if (handle.verbs.fd >= 0) close(handle.verbs.fd);
}

void Channel::notify(Cq* cq) {
  std::lock_guard<std::mutex> lock(mu);
  events.push_back(cq);
  uint64_t one = 1;
  ssize_t w = write(handle.verbs.fd, &one, sizeof(one));
  (void)w;
}

void Cq::push(const Cqe& entry) {
  std::lock_guard<std::mutex> lock(mu);
  if (static_cast<int>(entries.size()) >= depth && !overflowed) {
    overflowed = true;
    ibv_async_event event{};
    event.event_type = IBV_EVENT_CQ_ERR;
    event.element.cq = &handle.verbs;
    context->queue_event(event);
  }
  entries.push_back(entry);
  if (armed && channel != nullptr) {
    armed = false;
    channel->notify(this);
  }
}

void Cq::purge(const Qp* qp) {
  std::lock_guard<std::mutex> lock(mu);
  std::erase_if(entries, [qp](const Cqe& e) { return e.qp == qp; });
}

int Cq::poll(int max, ibv_wc* out) {
  std::lock_guard<std::mutex> lock(mu);
  int n = 0;
  while (n < max && !entries.empty()) {
    size_t pick = 0;
    if (reorder_window > 1) {
      // Among the first entries, any that has no older entry of its QP.
      size_t window = std::min<size_t>(static_cast<size_t>(reorder_window), entries.size());
      std::vector<size_t> candidates;
      for (size_t i = 0; i < window; ++i) {
        bool first = true;
        for (size_t j = 0; j < i && first; ++j) first = entries[j].qp != entries[i].qp;
        if (first) candidates.push_back(i);
      }
      pick = candidates[rng() % candidates.size()];
    }
    const Cqe& e = entries[pick];
    out[n] = e.wc;
    if (e.wc.status != IBV_WC_SUCCESS) count(kErrorCompletions);
    if (e.qp != nullptr) {
      // A polled completion frees its WR's slot and every slot before it.
      std::atomic<uint64_t>& retired = e.send ? e.qp->sq_retired : e.qp->rq_retired;
      if (retired.load(std::memory_order_relaxed) < e.index + 1) {
        retired.store(e.index + 1, std::memory_order_release);
      }
    }
    entries.erase(entries.begin() + static_cast<std::ptrdiff_t>(pick));
    ++n;
  }
  if (entries.size() < static_cast<size_t>(depth)) overflowed = false;
  count(kCompletions, static_cast<uint64_t>(n));
  return n;
}

Context::~Context() {
  if (!closed && async_fd >= 0) close(async_fd);
}

void Context::queue_event(const ibv_async_event& event) {
  std::lock_guard<std::mutex> lock(mu);
  if (closed) return;
  events.push_back(event);
  uint64_t one = 1;
  ssize_t w = write(async_fd, &one, sizeof(one));
  (void)w;
}

bool Context::is_port_down(int port) const {
  if (port < 1 || static_cast<size_t>(port) > info().ports.size()) return true;
  return port_down[port - 1].load();
}

Context* context_of(ibv_context* context) {
  if (context == nullptr) return nullptr;
  auto* vctx = reinterpret_cast<verbs_context*>(reinterpret_cast<char*>(context) -
                                                offsetof(verbs_context, context));
  return owner_of<Context>(vctx);
}

namespace {

ibv_wc_opcode send_wc_opcode(ibv_wr_opcode op) {
  switch (op) {
    case IBV_WR_RDMA_WRITE:
    case IBV_WR_RDMA_WRITE_WITH_IMM:
      return IBV_WC_RDMA_WRITE;
    case IBV_WR_RDMA_READ:
      return IBV_WC_RDMA_READ;
    default:
      return IBV_WC_SEND;
  }
}

}  // namespace

void push_send_cqe(Qp& qp, const SendWr& wr, ibv_wc_status status) {
  if (status != IBV_WC_SUCCESS && status != IBV_WC_WR_FLUSH_ERR) {
    log("QP %u send wr_id %#llx: %s", qp.qpn, static_cast<unsigned long long>(wr.wr_id),
        ibv_wc_status_str(status));
  }
  Cqe cqe;
  cqe.wc.wr_id = wr.wr_id;
  cqe.wc.status = status;
  cqe.wc.opcode = send_wc_opcode(wr.opcode);
  cqe.wc.byte_len = status == IBV_WC_SUCCESS ? static_cast<uint32_t>(wr.length) : 0;
  cqe.wc.qp_num = qp.qpn;
  cqe.wc.vendor_err = status == IBV_WC_SUCCESS ? 0 : 0x100 + status;
  cqe.qp = &qp;
  cqe.send = true;
  cqe.index = wr.index;
  qp.send_cq->push(cqe);
}

void push_recv_cqe(Qp& qp, const RecvWr& wr, ibv_wc_status status) {
  if (status != IBV_WC_SUCCESS && status != IBV_WC_WR_FLUSH_ERR) {
    log("QP %u recv wr_id %#llx: %s", qp.qpn, static_cast<unsigned long long>(wr.wr_id),
        ibv_wc_status_str(status));
  }
  Cqe cqe;
  cqe.wc.wr_id = wr.wr_id;
  cqe.wc.status = status;
  cqe.wc.opcode = IBV_WC_RECV;
  cqe.wc.qp_num = qp.qpn;
  cqe.wc.vendor_err = status == IBV_WC_SUCCESS ? 0 : 0x100 + status;
  cqe.qp = &qp;
  cqe.send = false;
  cqe.index = wr.index;
  qp.recv_cq->push(cqe);
}

void enter_error(Qp& qp) {
  qp.state = IBV_QPS_ERR;
  for (const SendWr& wr : qp.sq) push_send_cqe(qp, wr, IBV_WC_WR_FLUSH_ERR);
  qp.sq.clear();
  qp.send_next = 0;
  for (const RecvWr& wr : qp.rq) push_recv_cqe(qp, wr, IBV_WC_WR_FLUSH_ERR);
  qp.rq.clear();
}

// ------------------------------------------------------------ data path ----
namespace {

constexpr uint32_t kMaxQpWr = 16384;
constexpr uint32_t kMaxSge = 32;
constexpr uint32_t kMaxInline = 256;
constexpr int kMaxCqe = 1 << 20;
constexpr uint64_t kMaxMessage = 1ULL << 31;

// Resolves an sge to local memory; nullptr when the lkey does not cover it.
Piece local_piece(Qp& qp, const ibv_sge& sge, bool need_write) {
  Piece piece;
  piece.len = sge.length;
  std::shared_ptr<Mr> mr = qp.nic->find_lkey(sge.lkey);
  if (!mr || mr->pd != qp.pd) return piece;
  if (need_write && (mr->access & IBV_ACCESS_LOCAL_WRITE) == 0) return piece;
  piece.ptr = mr->translate(sge.addr, sge.length);
  if (piece.ptr != nullptr) piece.mr = std::move(mr);
  return piece;
}

int post_send(ibv_qp* verbs_qp, ibv_send_wr* wr, ibv_send_wr** bad_wr) {
  Qp& qp = *owner_of<Qp>(verbs_qp);
  count(kDoorbells);
  std::unique_lock<std::mutex> lock(qp.mu);
  auto fail = [&](ibv_send_wr* at, int error) {
    if (bad_wr != nullptr) *bad_wr = at;
    return error;
  };
  if (qp.destroyed || (qp.state != IBV_QPS_RTS && qp.state != IBV_QPS_ERR)) return fail(wr, EINVAL);
  bool posted = false;
  for (; wr != nullptr; wr = wr->next) {
    switch (wr->opcode) {
      case IBV_WR_SEND:
      case IBV_WR_SEND_WITH_IMM:
      case IBV_WR_RDMA_WRITE:
      case IBV_WR_RDMA_WRITE_WITH_IMM:
      case IBV_WR_RDMA_READ:
        break;
      default:
        return fail(wr, EINVAL);
    }
    if (wr->num_sge < 0 || static_cast<uint32_t>(wr->num_sge) > qp.cap.max_send_sge ||
        (wr->num_sge > 0 && wr->sg_list == nullptr)) {
      return fail(wr, EINVAL);
    }
    if (qp.sq_posted - qp.sq_retired.load(std::memory_order_acquire) >= qp.cap.max_send_wr) {
      return fail(wr, ENOMEM);
    }
    SendWr w;
    w.wr_id = wr->wr_id;
    w.opcode = wr->opcode;
    w.signaled = qp.sig_all || (wr->send_flags & IBV_SEND_SIGNALED) != 0;
    w.imm = wr->imm_data;  // network order in, network order out
    if (wr->opcode != IBV_WR_SEND && wr->opcode != IBV_WR_SEND_WITH_IMM) {
      w.remote_addr = wr->wr.rdma.remote_addr;
      w.rkey = wr->wr.rdma.rkey;
    }
    for (int i = 0; i < wr->num_sge; ++i) w.length += wr->sg_list[i].length;
    bool is_inline = (wr->send_flags & IBV_SEND_INLINE) != 0;
    if (is_inline) {
      if (wr->opcode == IBV_WR_RDMA_READ || w.length > qp.cap.max_inline_data) {
        return fail(wr, EINVAL);
      }
      // Copied now: the caller may reuse the buffers as soon as we return.
      w.inline_data.reserve(w.length);
      for (int i = 0; i < wr->num_sge; ++i) {
        const char* src = reinterpret_cast<const char*>(wr->sg_list[i].addr);
        w.inline_data.insert(w.inline_data.end(), src, src + wr->sg_list[i].length);
      }
      count(kInlineWrs);
    } else {
      for (int i = 0; i < wr->num_sge; ++i) {
        if (wr->sg_list[i].length == 0) continue;
        Piece piece = local_piece(qp, wr->sg_list[i], wr->opcode == IBV_WR_RDMA_READ);
        if (piece.ptr == nullptr) w.preset = IBV_WC_LOC_PROT_ERR;
        w.pieces.push_back(std::move(piece));
      }
    }
    if (w.length > kMaxMessage && w.preset == IBV_WC_SUCCESS) w.preset = IBV_WC_LOC_LEN_ERR;
    ibv_wc_status fault = qp.nic->on_send_posted();
    if (fault != IBV_WC_SUCCESS && w.preset == IBV_WC_SUCCESS) w.preset = fault;
    count(kSendWrs);
    static constexpr Counter kByOpcode[] = {kSendWrsWrite, kSendWrsWriteImm, kSendWrsSend,
                                            kSendWrsSendImm, kSendWrsRead};
    count(kByOpcode[wr->opcode]);
    if (w.signaled) count(kSignaledWrs);
    w.index = qp.sq_posted++;
    w.psn = qp.next_psn;
    qp.next_psn = (qp.next_psn + 1) & 0xffffff;
    if (qp.state == IBV_QPS_ERR) {
      push_send_cqe(qp, w, IBV_WC_WR_FLUSH_ERR);
    } else {
      qp.sq.push_back(std::move(w));
      posted = true;
    }
  }
  lock.unlock();
  if (posted) qp.nic->kick(qp);
  return 0;
}

int post_recv(ibv_qp* verbs_qp, ibv_recv_wr* wr, ibv_recv_wr** bad_wr) {
  Qp& qp = *owner_of<Qp>(verbs_qp);
  count(kRecvPosts);
  std::lock_guard<std::mutex> lock(qp.mu);
  auto fail = [&](ibv_recv_wr* at, int error) {
    if (bad_wr != nullptr) *bad_wr = at;
    return error;
  };
  if (qp.destroyed || qp.state == IBV_QPS_RESET) return fail(wr, EINVAL);
  for (; wr != nullptr; wr = wr->next) {
    if (wr->num_sge < 0 || static_cast<uint32_t>(wr->num_sge) > qp.cap.max_recv_sge ||
        (wr->num_sge > 0 && wr->sg_list == nullptr)) {
      return fail(wr, EINVAL);
    }
    if (qp.rq_posted - qp.rq_retired.load(std::memory_order_acquire) >= qp.cap.max_recv_wr) {
      return fail(wr, ENOMEM);
    }
    RecvWr r;
    r.wr_id = wr->wr_id;
    for (int i = 0; i < wr->num_sge; ++i) {
      if (wr->sg_list[i].length == 0) continue;
      Piece piece = local_piece(qp, wr->sg_list[i], true);
      if (piece.ptr == nullptr) r.preset = IBV_WC_LOC_PROT_ERR;
      r.capacity += piece.len;
      r.pieces.push_back(std::move(piece));
    }
    r.index = qp.rq_posted++;
    count(kRecvWrs);
    if (qp.state == IBV_QPS_ERR) {
      push_recv_cqe(qp, r, IBV_WC_WR_FLUSH_ERR);
    } else {
      qp.rq.push_back(std::move(r));
    }
  }
  return 0;
}

int poll_cq(ibv_cq* verbs_cq, int num_entries, ibv_wc* wc) {
  count(kPollCalls);
  if (num_entries <= 0) return 0;
  return owner_of<Cq>(verbs_cq)->poll(num_entries, wc);
}

int req_notify_cq(ibv_cq* verbs_cq, int /*solicited_only*/) {
  Cq* cq = owner_of<Cq>(verbs_cq);
  std::lock_guard<std::mutex> lock(cq->mu);
  cq->armed = true;
  return 0;
}

int fill_port(Context* context, uint8_t port_num, ibv_port_attr* out, size_t len) {
  const DeviceInfo& info = context->info();
  if (port_num < 1 || port_num > info.ports.size()) return EINVAL;
  const PortInfo& port = info.ports[port_num - 1];
  bool down = context->is_port_down(port_num);
  ibv_port_attr a{};
  a.state = down ? IBV_PORT_DOWN : IBV_PORT_ACTIVE;
  a.max_mtu = IBV_MTU_4096;
  a.active_mtu = info.mtu;
  a.gid_tbl_len = static_cast<int>(port.gids.size());
  a.port_cap_flags = IBV_PORT_CM_SUP | IBV_PORT_DEVICE_MGMT_SUP | IBV_PORT_VENDOR_CLASS_SUP;
  a.max_msg_sz = 1u << 31;
  a.pkey_tbl_len = 1;
  a.lid = info.ib ? port.lid : 0;
  a.sm_lid = info.ib ? 1 : 0;
  a.max_vl_num = info.ib ? 4 : 1;
  a.subnet_timeout = 18;
  a.active_width = info.width;
  a.active_speed = info.speed;
  a.phys_state = down ? 3 : 5;  // Disabled : LinkUp
  a.link_layer = info.ib ? IBV_LINK_LAYER_INFINIBAND : IBV_LINK_LAYER_ETHERNET;
  a.flags = info.ib ? 0 : IBV_QPF_GRH_REQUIRED;
  std::memcpy(out, &a, std::min(len, sizeof(a)));
  return 0;
}

int query_port_ex(ibv_context* context, uint8_t port_num, ibv_port_attr* attr, size_t len) {
  return fill_port(context_of(context), port_num, attr, len);
}

// --------------------------------------------------------- modify_qp -------
constexpr int kAccessBits = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
                            IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;

// Required and optional attribute masks of an RC transition, as the IB spec
// (and the kernel's table) has them; false when the transition is illegal.
bool transition(ibv_qp_state from, ibv_qp_state to, int* required, int* optional) {
  *required = 0;
  *optional = 0;
  if (to == IBV_QPS_RESET || to == IBV_QPS_ERR) return true;
  if (from == IBV_QPS_RESET && to == IBV_QPS_INIT) {
    *required = IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;
    return true;
  }
  if (from == IBV_QPS_INIT && to == IBV_QPS_INIT) {
    *optional = IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;
    return true;
  }
  if (from == IBV_QPS_INIT && to == IBV_QPS_RTR) {
    *required = IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
    *optional = IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS | IBV_QP_PKEY_INDEX;
    return true;
  }
  if (from == IBV_QPS_RTR && to == IBV_QPS_RTS) {
    *required = IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
                IBV_QP_MAX_QP_RD_ATOMIC;
    *optional =
        IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS | IBV_QP_MIN_RNR_TIMER | IBV_QP_PATH_MIG_STATE;
    return true;
  }
  if (from == IBV_QPS_RTS && to == IBV_QPS_RTS) {
    *optional =
        IBV_QP_ACCESS_FLAGS | IBV_QP_ALT_PATH | IBV_QP_PATH_MIG_STATE | IBV_QP_MIN_RNR_TIMER;
    return true;
  }
  return false;
}

// Finds the target of an RTR address; leaves the QP unreachable (its WRs
// time out) when the QP number or the address names nothing alive.
void resolve_route(Qp& qp) {
  qp.peer.reset();
  qp.peer_port = 0;
  qp.unreachable = true;
  RemoteQp remote;
  if (!registry_read_qp(qp.dest_qpn, &remote) || !pid_alive(remote.pid)) return;
  bool ib = qp.context->info().ib;
  if (remote.ib != ib) return;
  for (const RemotePort& port : remote.ports) {
    bool match = false;
    if (ib) {
      match = port.lid == qp.ah.dlid;
    } else {
      match = std::any_of(port.gids.begin(), port.gids.end(), [&](const ibv_gid& g) {
        return std::memcmp(g.raw, qp.ah.grh.dgid.raw, 16) == 0;
      });
    }
    if (match) {
      qp.peer_port = static_cast<uint8_t>(port.port);
      break;
    }
  }
  if (qp.peer_port == 0) return;
  qp.peer = qp.nic->peer(remote.nic, remote.pid);
  qp.unreachable = false;
}

void reset_qp(Qp& qp) {
  qp.sq.clear();
  qp.rq.clear();
  qp.send_next = 0;
  qp.sq_posted = 0;
  qp.rq_posted = 0;
  qp.sq_retired.store(0);
  qp.rq_retired.store(0);
  qp.peer.reset();
  qp.peer_port = 0;
  qp.unreachable = false;
  qp.broken = false;
  qp.resume_at = Clock::time_point{};
  qp.expected_psn = 0;
  qp.nak_outstanding = false;
  qp.send_cq->purge(&qp);
  if (qp.recv_cq != qp.send_cq) qp.recv_cq->purge(&qp);
}

int modify_qp(Qp& qp, ibv_qp_attr* attr, int mask) {
  std::unique_lock<std::mutex> lock(qp.mu);
  if (qp.destroyed || attr == nullptr) return EINVAL;
  const DeviceInfo& info = qp.context->info();
  ibv_qp_state from = qp.state;
  if ((mask & IBV_QP_CUR_STATE) != 0 && attr->cur_qp_state != from) return EINVAL;
  ibv_qp_state to = (mask & IBV_QP_STATE) != 0 ? attr->qp_state : from;
  int required = 0;
  int optional = 0;
  if (!transition(from, to, &required, &optional)) return EINVAL;
  if ((mask & required) != required) return EINVAL;
  if ((mask & ~(required | optional | IBV_QP_STATE | IBV_QP_CUR_STATE)) != 0) return EINVAL;

  uint8_t port = (mask & IBV_QP_PORT) != 0 ? attr->port_num : qp.port;
  if ((mask & IBV_QP_PORT) != 0 && (port < 1 || port > info.ports.size())) return EINVAL;
  if ((mask & IBV_QP_PKEY_INDEX) != 0 && attr->pkey_index != 0) return EINVAL;
  if ((mask & IBV_QP_ACCESS_FLAGS) != 0 && (attr->qp_access_flags & ~kAccessBits) != 0) {
    return EINVAL;
  }
  if ((mask & IBV_QP_PATH_MTU) != 0 &&
      (attr->path_mtu < IBV_MTU_256 || attr->path_mtu > IBV_MTU_4096)) {
    return EINVAL;
  }
  if ((mask & IBV_QP_MAX_DEST_RD_ATOMIC) != 0 && attr->max_dest_rd_atomic > 16) return EINVAL;
  if ((mask & IBV_QP_MAX_QP_RD_ATOMIC) != 0 && attr->max_rd_atomic > 16) return EINVAL;
  if ((mask & IBV_QP_MIN_RNR_TIMER) != 0 && attr->min_rnr_timer > 31) return EINVAL;
  if ((mask & IBV_QP_TIMEOUT) != 0 && attr->timeout > 31) return EINVAL;
  if ((mask & IBV_QP_RETRY_CNT) != 0 && attr->retry_cnt > 7) return EINVAL;
  if ((mask & IBV_QP_RNR_RETRY) != 0 && attr->rnr_retry > 7) return EINVAL;
  if ((mask & IBV_QP_AV) != 0) {
    const ibv_ah_attr& ah = attr->ah_attr;
    const PortInfo& local = info.ports[port - 1];
    if (ah.port_num != 0 && ah.port_num != port) return EINVAL;
    // RoCE has no LIDs: the address is the GID, so a GRH is mandatory.
    if (!info.ib && ah.is_global == 0) return EINVAL;
    if (ah.is_global != 0 &&
        (ah.grh.sgid_index >= local.gids.size() || !local.gids[ah.grh.sgid_index].valid)) {
      return EINVAL;
    }
    if (info.ib && ah.dlid == 0) return EINVAL;
  }

  if ((mask & IBV_QP_PORT) != 0) qp.port = port;
  if ((mask & IBV_QP_PKEY_INDEX) != 0) qp.pkey_index = attr->pkey_index;
  if ((mask & IBV_QP_ACCESS_FLAGS) != 0) qp.access = attr->qp_access_flags;
  if ((mask & IBV_QP_PATH_MTU) != 0) qp.path_mtu = attr->path_mtu;
  if ((mask & IBV_QP_DEST_QPN) != 0) qp.dest_qpn = attr->dest_qp_num & 0xffffff;
  if ((mask & IBV_QP_RQ_PSN) != 0) qp.rq_psn = attr->rq_psn & 0xffffff;
  if ((mask & IBV_QP_SQ_PSN) != 0) qp.sq_psn = attr->sq_psn & 0xffffff;
  if ((mask & IBV_QP_MIN_RNR_TIMER) != 0) qp.min_rnr_timer = attr->min_rnr_timer;
  if ((mask & IBV_QP_TIMEOUT) != 0) qp.timeout = attr->timeout;
  if ((mask & IBV_QP_RETRY_CNT) != 0) qp.retry_cnt = attr->retry_cnt;
  if ((mask & IBV_QP_RNR_RETRY) != 0) qp.rnr_retry = attr->rnr_retry;
  if ((mask & IBV_QP_MAX_QP_RD_ATOMIC) != 0) qp.max_rd_atomic = attr->max_rd_atomic;
  if ((mask & IBV_QP_MAX_DEST_RD_ATOMIC) != 0) qp.max_dest_rd_atomic = attr->max_dest_rd_atomic;
  if ((mask & IBV_QP_AV) != 0) qp.ah = attr->ah_attr;

  bool kick = false;
  if (to == IBV_QPS_RESET) {
    reset_qp(qp);
  } else if (to == IBV_QPS_ERR) {
    enter_error(qp);
  } else if (from == IBV_QPS_INIT && to == IBV_QPS_RTR) {
    resolve_route(qp);
    qp.expected_psn = qp.rq_psn;
    qp.nak_outstanding = false;
    kick = true;  // connect now, so that a vanished peer shows
  } else if (from == IBV_QPS_RTR && to == IBV_QPS_RTS) {
    qp.next_psn = qp.sq_psn;
  }
  qp.state = to;
  qp.handle.verbs.state = to;
  lock.unlock();
  if (kick) qp.nic->kick(qp);
  return 0;
}

const char* kWcStatusText[] = {
    "success",
    "local length error",
    "local QP operation error",
    "local EE context operation error",
    "local protection error",
    "Work Request Flushed Error",
    "memory bind operation error",
    "bad response error",
    "local access error",
    "remote invalid request error",
    "remote access error",
    "remote operation error",
    "transport retry counter exceeded",
    "RNR retry counter exceeded",
    "local RDD violation error",
    "remote invalid RD request",
    "operation aborted",
    "invalid EE context number",
    "invalid EE context state",
    "fatal error",
    "response timeout error",
    "general error",
    "tag matching error",
    "tag matching rendezvous incomplete",
};

const char* kEventText[] = {
    "CQ error",
    "local work queue catastrophic error",
    "invalid request local work queue error",
    "local access violation work queue error",
    "communication established",
    "send queue drained",
    "path migrated",
    "path migration request error",
    "local catastrophic error",
    "port active",
    "port error",
    "LID change",
    "P_Key change",
    "SM change",
    "SRQ catastrophic error",
    "SRQ limit reached",
    "last WQE reached",
    "client reregistration",
    "GID table change",
    "WQ fatal",
};

std::atomic<uint32_t> g_handles{1};

}  // namespace
}  // namespace softverbs

using namespace softverbs;

// ------------------------------------------------------------- devices -----
SOFTVERBS_API ibv_device** ibv_get_device_list(int* num_devices) {
  std::vector<Device*> devices = scan_devices();
  auto** list = static_cast<ibv_device**>(std::calloc(devices.size() + 1, sizeof(ibv_device*)));
  if (list == nullptr) {
    errno = ENOMEM;
    return nullptr;
  }
  for (size_t i = 0; i < devices.size(); ++i) list[i] = &devices[i]->handle.verbs;
  if (num_devices != nullptr) *num_devices = static_cast<int>(devices.size());
  return list;
}

SOFTVERBS_API void ibv_free_device_list(ibv_device** list) {
  std::free(list);
}

SOFTVERBS_API const char* ibv_get_device_name(ibv_device* device) {
  return device == nullptr ? nullptr : device->name;
}

SOFTVERBS_API __be64 ibv_get_device_guid(ibv_device* device) {
  return htobe64(owner_of<Device>(device)->info.node_guid);
}

SOFTVERBS_API int ibv_get_device_index(ibv_device* device) {
  return owner_of<Device>(device)->info.index;
}

SOFTVERBS_API ibv_context* ibv_open_device(ibv_device* verbs_device) {
  Device* device = owner_of<Device>(verbs_device);
  if (device == nullptr) {
    errno = EINVAL;
    return nullptr;
  }
  Global& g = global();
  std::lock_guard<std::mutex> lock(g.mu);
  if (g.nic && g.nic_pid != getpid()) {
    // Inherited through fork: the parent's NIC thread does not exist here.
    (void)g.nic.release();
    (void)new std::vector<std::shared_ptr<Context>>(std::move(g.contexts));
    g.contexts.clear();
  }
  if (!g.nic) {
    g.nic = Nic::start();
    if (!g.nic) {
      if (errno == 0) errno = EIO;
      return nullptr;
    }
    g.nic_pid = getpid();
  }
  auto context = std::make_shared<Context>();
  context->handle.owner = context.get();
  context->device = device;
  context->nic = g.nic.get();
  context->async_fd = eventfd(0, EFD_CLOEXEC | EFD_SEMAPHORE);
  if (context->async_fd < 0) {
    if (g.contexts.empty()) g.nic.reset();  // nothing else keeps the NIC
    return nullptr;
  }
  context->port_down = std::make_unique<std::atomic<bool>[]>(device->info.ports.size());
  context->reorder_window = static_cast<int>(std::max(0L, env_long("SOFTVERBS_REORDER", 0)));
  context->reorder_seed = static_cast<uint64_t>(env_long("SOFTVERBS_REORDER_SEED", 1));
  verbs_context& vctx = context->handle.verbs;
  vctx.sz = sizeof(verbs_context);
  vctx.query_port = query_port_ex;
  ibv_context& c = vctx.context;
  c.device = verbs_device;
  c.ops.post_send = post_send;
  c.ops.post_recv = post_recv;
  c.ops.poll_cq = poll_cq;
  c.ops.req_notify_cq = req_notify_cq;
  c.cmd_fd = -1;
  c.async_fd = context->async_fd;
  c.num_comp_vectors = 1;
  pthread_mutex_init(&c.mutex, nullptr);
  c.abi_compat = __VERBS_ABI_IS_EXTENDED;
  long port_down_ms = env_long("SOFTVERBS_FAULT_PORT_DOWN_MS", 0);
  if (port_down_ms > 0) g.nic->port_down_after(context, port_down_ms);
  g.contexts.push_back(context);
  log("open %s: context %p, %zu open", device->info.name.c_str(), static_cast<void*>(&c),
      g.contexts.size());
  return &c;
}

SOFTVERBS_API int ibv_close_device(ibv_context* verbs_context_ptr) {
  Context* context = context_of(verbs_context_ptr);
  if (context == nullptr) return EINVAL;
  Global& g = global();
  std::unique_ptr<Nic> stopped;
  std::shared_ptr<Context> keep;
  {
    std::lock_guard<std::mutex> lock(g.mu);
    auto it = std::find_if(g.contexts.begin(), g.contexts.end(),
                           [&](const std::shared_ptr<Context>& c) { return c.get() == context; });
    if (it == g.contexts.end()) return EINVAL;
    keep = *it;
    g.contexts.erase(it);
    // Inherited through fork, or already stopped at exit: nothing to stop.
    if (!g.nic || g.nic_pid != getpid()) return 0;
    for (auto& qp : g.nic->all_qps()) {
      if (qp->context.get() != context) continue;
      {
        std::lock_guard<std::mutex> qlock(qp->mu);
        qp->destroyed = true;
        qp->sq.clear();
        qp->rq.clear();
      }
      registry_remove_qp(qp->qpn);
      g.nic->remove_qp(qp->qpn);
      g.orphans.push_back(qp);
    }
    {
      std::lock_guard<std::mutex> clock(context->mu);
      close(context->async_fd);
      context->async_fd = -1;
      context->closed = true;
      pthread_mutex_destroy(&context->handle.verbs.context.mutex);
    }
    log("close %s: context %p, %zu open", context->info().name.c_str(),
        static_cast<void*>(verbs_context_ptr), g.contexts.size());
    if (g.contexts.empty()) {
      write_counters_file();
      stopped = std::move(g.nic);
    }
  }
  stopped.reset();  // joins the NIC thread, closes its sockets
  return 0;
}

SOFTVERBS_API int ibv_query_device(ibv_context* verbs_ctx, ibv_device_attr* attr) {
  Context* context = context_of(verbs_ctx);
  if (context == nullptr || attr == nullptr) return EINVAL;
  const DeviceInfo& info = context->info();
  std::memset(attr, 0, sizeof(*attr));
  std::snprintf(attr->fw_ver, sizeof(attr->fw_ver), "softverbs 1.0");
  attr->node_guid = htobe64(info.node_guid);
  attr->sys_image_guid = htobe64(info.node_guid);
  attr->max_mr_size = ~0ULL;
  attr->page_size_cap = 0xfffff000;
  attr->vendor_id = 0x1de5;
  attr->vendor_part_id = 0x5f7e;
  attr->hw_ver = 1;
  attr->max_qp = 1 << 17;
  attr->max_qp_wr = kMaxQpWr;
  attr->device_cap_flags = IBV_DEVICE_RC_RNR_NAK_GEN | IBV_DEVICE_PORT_ACTIVE_EVENT |
                           IBV_DEVICE_SYS_IMAGE_GUID | IBV_DEVICE_CHANGE_PHY_PORT;
  attr->max_sge = kMaxSge;
  attr->max_sge_rd = kMaxSge;
  attr->max_cq = 1 << 16;
  attr->max_cqe = kMaxCqe;
  attr->max_mr = 1 << 20;
  attr->max_pd = 1 << 16;
  attr->max_qp_rd_atom = 16;
  attr->max_res_rd_atom = 16 << 10;
  attr->max_qp_init_rd_atom = 16;
  attr->atomic_cap = IBV_ATOMIC_NONE;
  attr->max_pkeys = 1;
  attr->local_ca_ack_delay = 15;
  attr->phys_port_cnt = static_cast<uint8_t>(info.ports.size());
  return 0;
}

// The exported entry fills the pre-1.4 layout (up to port_cap_flags2), like
// rdma-core's; the inline ibv_query_port goes through verbs_context.
SOFTVERBS_API int(ibv_query_port)(ibv_context* verbs_ctx, uint8_t port_num,
                                  struct _compat_ibv_port_attr* attr) {
  return fill_port(context_of(verbs_ctx), port_num, reinterpret_cast<ibv_port_attr*>(attr),
                   offsetof(ibv_port_attr, port_cap_flags2));
}

SOFTVERBS_API int ibv_query_gid(ibv_context* verbs_ctx, uint8_t port_num, int index, ibv_gid* gid) {
  Context* context = context_of(verbs_ctx);
  const DeviceInfo& info = context->info();
  if (port_num < 1 || port_num > info.ports.size() || index < 0 ||
      static_cast<size_t>(index) >= info.ports[port_num - 1].gids.size()) {
    errno = EINVAL;
    return -1;
  }
  const GidSlot& slot = info.ports[port_num - 1].gids[index];
  *gid = slot.valid ? slot.gid : ibv_gid{};  // an empty slot reads as zeros
  return 0;
}

SOFTVERBS_API int _ibv_query_gid_ex(ibv_context* verbs_ctx, uint32_t port_num, uint32_t gid_index,
                                    ibv_gid_entry* entry, uint32_t flags, size_t entry_size) {
  Context* context = context_of(verbs_ctx);
  if (context == nullptr || entry == nullptr || flags != 0 || entry_size < sizeof(ibv_gid_entry)) {
    return EINVAL;
  }
  const DeviceInfo& info = context->info();
  if (port_num < 1 || port_num > info.ports.size()) return EINVAL;
  const PortInfo& port = info.ports[port_num - 1];
  if (gid_index >= port.gids.size()) return EINVAL;
  const GidSlot& slot = port.gids[gid_index];
  if (!slot.valid) return ENODATA;
  std::memset(entry, 0, entry_size);
  entry->gid = slot.gid;
  entry->gid_index = gid_index;
  entry->port_num = port_num;
  entry->gid_type = slot.type;
  entry->ndev_ifindex = info.ib ? 0 : info.ifindex;
  return 0;
}

SOFTVERBS_API ssize_t _ibv_query_gid_table(ibv_context* verbs_ctx, ibv_gid_entry* entries,
                                           size_t max_entries, uint32_t flags, size_t entry_size) {
  Context* context = context_of(verbs_ctx);
  if (context == nullptr || flags != 0 || entry_size < sizeof(ibv_gid_entry)) return -EINVAL;
  const DeviceInfo& info = context->info();
  size_t n = 0;
  for (uint32_t p = 1; p <= info.ports.size(); ++p) {
    for (uint32_t i = 0; i < info.ports[p - 1].gids.size(); ++i) {
      if (!info.ports[p - 1].gids[i].valid) continue;
      if (n == max_entries) return -ENOMEM;
      auto* entry =
          reinterpret_cast<ibv_gid_entry*>(reinterpret_cast<char*>(entries) + n * entry_size);
      _ibv_query_gid_ex(verbs_ctx, p, i, entry, 0, entry_size);
      ++n;
    }
  }
  return static_cast<ssize_t>(n);
}

SOFTVERBS_API int ibv_query_pkey(ibv_context* verbs_ctx, uint8_t port_num, int index,
                                 __be16* pkey) {
  Context* context = context_of(verbs_ctx);
  if (port_num < 1 || port_num > context->info().ports.size() || index != 0) {
    errno = EINVAL;
    return -1;
  }
  *pkey = htobe16(0xffff);
  return 0;
}

// -------------------------------------------------------------- PD & MR ----
SOFTVERBS_API ibv_pd* ibv_alloc_pd(ibv_context* verbs_ctx) {
  Context* context = context_of(verbs_ctx);
  if (context == nullptr) {
    errno = EINVAL;
    return nullptr;
  }
  auto* pd = new Pd();
  pd->handle.owner = pd;
  pd->handle.verbs.context = verbs_ctx;
  pd->handle.verbs.handle = g_handles.fetch_add(1);
  Global& g = global();
  {
    std::lock_guard<std::mutex> lock(g.mu);
    for (auto& c : g.contexts) {
      if (c.get() == context) pd->context = c;
    }
  }
  return &pd->handle.verbs;
}

SOFTVERBS_API int ibv_dealloc_pd(ibv_pd* verbs_pd) {
  Pd* pd = owner_of<Pd>(verbs_pd);
  if (pd == nullptr) return EINVAL;
  if (pd->users.load() > 0) return EBUSY;
  delete pd;
  return 0;
}

namespace {

ibv_mr* register_mr(ibv_pd* verbs_pd, void* addr, size_t length, uint64_t iova, int access,
                    void* mapping, size_t mapping_length, char* base) {
  Pd* pd = owner_of<Pd>(verbs_pd);
  // Remote write (or atomic) without local write is refused by hardware.
  bool bad_access = (access & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC)) != 0 &&
                    (access & IBV_ACCESS_LOCAL_WRITE) == 0;
  if (pd == nullptr || length == 0 || bad_access) {
    if (mapping != nullptr) munmap(mapping, mapping_length);
    errno = EINVAL;
    return nullptr;
  }
  auto mr = std::make_shared<Mr>();
  mr->handle.owner = mr.get();
  mr->pd = pd;
  mr->iova = iova;
  mr->base = base;
  mr->length = length;
  mr->access = access;
  mr->mapping = mapping;
  mr->mapping_length = mapping_length;
  ibv_mr& v = mr->handle.verbs;
  v.context = verbs_pd->context;
  v.pd = verbs_pd;
  v.addr = addr;
  v.length = length;
  v.handle = g_handles.fetch_add(1);
  context_of(verbs_pd->context)->nic->add_mr(mr);
  pd->users.fetch_add(1);
  return &v;
}

}  // namespace

SOFTVERBS_API ibv_mr*(ibv_reg_mr)(ibv_pd* pd, void* addr, size_t length, int access) {
  return register_mr(pd, addr, length, reinterpret_cast<uintptr_t>(addr), access, nullptr, 0,
                     static_cast<char*>(addr));
}

SOFTVERBS_API ibv_mr*(ibv_reg_mr_iova)(ibv_pd* pd, void* addr, size_t length, uint64_t iova,
                                       int access) {
  return register_mr(pd, addr, length, iova, access, nullptr, 0, static_cast<char*>(addr));
}

SOFTVERBS_API ibv_mr* ibv_reg_mr_iova2(ibv_pd* pd, void* addr, size_t length, uint64_t iova,
                                       unsigned int access) {
  return register_mr(pd, addr, length, iova, static_cast<int>(access), nullptr, 0,
                     static_cast<char*>(addr));
}

SOFTVERBS_API ibv_mr* ibv_reg_dmabuf_mr(ibv_pd* pd, uint64_t offset, size_t length, uint64_t iova,
                                        int fd, int access) {
  if (env_long("SOFTVERBS_DMABUF", 1) == 0) {
    errno = EOPNOTSUPP;
    return nullptr;
  }
  // NCCL probes support with fd -1: EBADF means "supported".
  if (fd < 0) {
    errno = EBADF;
    return nullptr;
  }
  if (length == 0) {
    errno = EINVAL;
    return nullptr;
  }
  // The same pages as the exporter's: map the buffer shared.
  const uint64_t page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  uint64_t aligned = offset & ~(page - 1);
  uint64_t delta = offset - aligned;
  size_t map_length = static_cast<size_t>((delta + length + page - 1) & ~(page - 1));
  void* mapping = mmap(nullptr, map_length, PROT_READ | PROT_WRITE, MAP_SHARED, fd,
                       static_cast<off_t>(aligned));
  if (mapping == MAP_FAILED) return nullptr;
  return register_mr(pd, reinterpret_cast<void*>(iova), length, iova, access, mapping, map_length,
                     static_cast<char*>(mapping) + delta);
}

SOFTVERBS_API int ibv_dereg_mr(ibv_mr* verbs_mr) {
  Mr* mr = owner_of<Mr>(verbs_mr);
  if (mr == nullptr) return EINVAL;
  Pd* pd = mr->pd;
  // In-flight WRs keep the region (and a dma-buf mapping) until they finish.
  context_of(verbs_mr->context)->nic->remove_mr(mr);
  pd->users.fetch_sub(1);
  return 0;
}

// ----------------------------------------------------------- CQ & channel --
SOFTVERBS_API ibv_comp_channel* ibv_create_comp_channel(ibv_context* verbs_ctx) {
  int fd = eventfd(0, EFD_CLOEXEC | EFD_SEMAPHORE);
  if (fd < 0) return nullptr;
  auto* channel = new Channel();
  channel->handle.owner = channel;
  channel->handle.verbs.context = verbs_ctx;
  channel->handle.verbs.fd = fd;
  return &channel->handle.verbs;
}

SOFTVERBS_API int ibv_destroy_comp_channel(ibv_comp_channel* verbs_channel) {
  Channel* channel = owner_of<Channel>(verbs_channel);
  if (channel == nullptr) return EINVAL;
  if (channel->users.load() > 0) return EBUSY;
  delete channel;
  return 0;
}

SOFTVERBS_API ibv_cq* ibv_create_cq(ibv_context* verbs_ctx, int cqe, void* cq_context,
                                    ibv_comp_channel* verbs_channel, int comp_vector) {
  Context* context = context_of(verbs_ctx);
  if (context == nullptr || cqe < 1 || cqe > kMaxCqe || comp_vector < 0 ||
      comp_vector >= verbs_ctx->num_comp_vectors) {
    errno = EINVAL;
    return nullptr;
  }
  auto* cq = new Cq();
  cq->handle.owner = cq;
  cq->context = context;
  cq->channel = owner_of<Channel>(verbs_channel);
  if (cq->channel != nullptr) cq->channel->users.fetch_add(1);
  cq->depth = cqe;
  cq->reorder_window = context->reorder_window;
  cq->rng.seed(context->reorder_seed);
  ibv_cq& v = cq->handle.verbs;
  v.context = verbs_ctx;
  v.channel = verbs_channel;
  v.cq_context = cq_context;
  v.handle = g_handles.fetch_add(1);
  v.cqe = cqe;
  pthread_mutex_init(&v.mutex, nullptr);
  pthread_cond_init(&v.cond, nullptr);
  return &v;
}

SOFTVERBS_API int ibv_destroy_cq(ibv_cq* verbs_cq) {
  Cq* cq = owner_of<Cq>(verbs_cq);
  if (cq == nullptr) return EINVAL;
  if (cq->users.load() > 0) return EBUSY;
  if (cq->channel != nullptr) cq->channel->users.fetch_sub(1);
  pthread_mutex_destroy(&verbs_cq->mutex);
  pthread_cond_destroy(&verbs_cq->cond);
  delete cq;
  return 0;
}

SOFTVERBS_API int ibv_get_cq_event(ibv_comp_channel* verbs_channel, ibv_cq** cq,
                                   void** cq_context) {
  Channel* channel = owner_of<Channel>(verbs_channel);
  uint64_t v = 0;
  if (read(verbs_channel->fd, &v, sizeof(v)) != static_cast<ssize_t>(sizeof(v))) return -1;
  std::lock_guard<std::mutex> lock(channel->mu);
  if (channel->events.empty()) {
    errno = EAGAIN;
    return -1;
  }
  Cq* c = channel->events.front();
  channel->events.pop_front();
  *cq = &c->handle.verbs;
  *cq_context = c->handle.verbs.cq_context;
  return 0;
}

SOFTVERBS_API void ibv_ack_cq_events(ibv_cq* /*cq*/, unsigned int /*nevents*/) {}

// ------------------------------------------------------------------- QP ----
SOFTVERBS_API ibv_qp* ibv_create_qp(ibv_pd* verbs_pd, ibv_qp_init_attr* init) {
  Pd* pd = owner_of<Pd>(verbs_pd);
  if (pd == nullptr || init == nullptr) {
    errno = EINVAL;
    return nullptr;
  }
  if (init->qp_type != IBV_QPT_RC) {
    errno = (init->qp_type == IBV_QPT_UC || init->qp_type == IBV_QPT_UD ||
             init->qp_type == IBV_QPT_RAW_PACKET || init->qp_type == IBV_QPT_XRC_SEND ||
             init->qp_type == IBV_QPT_XRC_RECV || init->qp_type == IBV_QPT_DRIVER)
                ? EOPNOTSUPP
                : EINVAL;
    return nullptr;
  }
  if (init->srq != nullptr) {
    errno = EOPNOTSUPP;
    return nullptr;
  }
  Cq* send_cq = owner_of<Cq>(init->send_cq);
  Cq* recv_cq = owner_of<Cq>(init->recv_cq);
  Context* context = context_of(verbs_pd->context);
  const ibv_qp_cap& cap = init->cap;
  if (send_cq == nullptr || recv_cq == nullptr || send_cq->context != context ||
      recv_cq->context != context || cap.max_send_wr > kMaxQpWr || cap.max_recv_wr > kMaxQpWr ||
      cap.max_send_sge > kMaxSge || cap.max_recv_sge > kMaxSge ||
      cap.max_inline_data > kMaxInline) {
    errno = EINVAL;
    return nullptr;
  }
  auto qp = std::make_shared<Qp>();
  qp->handle.owner = qp.get();
  qp->context = pd->context;
  qp->nic = context->nic;
  qp->pd = pd;
  qp->send_cq = send_cq;
  qp->recv_cq = recv_cq;
  qp->sig_all = init->sq_sig_all != 0;
  qp->cap = cap;
  qp->qpn = registry_create_qp(context->nic->path(), context->info());
  qp->ece_options = static_cast<uint32_t>(env_long("SOFTVERBS_ECE", 0));
  qp->ece_supported = qp->ece_options != 0;
  if (qp->qpn == 0) {
    errno = ENOMEM;
    return nullptr;
  }
  ibv_qp& v = qp->handle.verbs;
  v.context = verbs_pd->context;
  v.qp_context = init->qp_context;
  v.pd = verbs_pd;
  v.send_cq = init->send_cq;
  v.recv_cq = init->recv_cq;
  v.handle = qp->qpn;
  v.qp_num = qp->qpn;
  v.state = IBV_QPS_RESET;
  v.qp_type = IBV_QPT_RC;
  pthread_mutex_init(&v.mutex, nullptr);
  pthread_cond_init(&v.cond, nullptr);
  pd->users.fetch_add(1);
  send_cq->users.fetch_add(1);
  recv_cq->users.fetch_add(1);
  context->nic->add_qp(qp);
  return &v;
}

SOFTVERBS_API int ibv_modify_qp(ibv_qp* verbs_qp, ibv_qp_attr* attr, int mask) {
  Qp* qp = owner_of<Qp>(verbs_qp);
  if (qp == nullptr) return EINVAL;
  return modify_qp(*qp, attr, mask);
}

SOFTVERBS_API int ibv_query_qp(ibv_qp* verbs_qp, ibv_qp_attr* attr, int /*mask*/,
                               ibv_qp_init_attr* init) {
  Qp* qp = owner_of<Qp>(verbs_qp);
  if (qp == nullptr || attr == nullptr || init == nullptr) return EINVAL;
  std::lock_guard<std::mutex> lock(qp->mu);
  std::memset(attr, 0, sizeof(*attr));
  attr->qp_state = qp->state;
  attr->cur_qp_state = qp->state;
  attr->path_mtu = qp->path_mtu;
  attr->path_mig_state = IBV_MIG_MIGRATED;
  attr->rq_psn = qp->rq_psn;
  attr->sq_psn = qp->sq_psn;
  attr->dest_qp_num = qp->dest_qpn;
  attr->qp_access_flags = qp->access;
  attr->cap = qp->cap;
  attr->ah_attr = qp->ah;
  attr->pkey_index = qp->pkey_index;
  attr->max_rd_atomic = qp->max_rd_atomic;
  attr->max_dest_rd_atomic = qp->max_dest_rd_atomic;
  attr->min_rnr_timer = qp->min_rnr_timer;
  attr->port_num = qp->port;
  attr->timeout = qp->timeout;
  attr->retry_cnt = qp->retry_cnt;
  attr->rnr_retry = qp->rnr_retry;
  std::memset(init, 0, sizeof(*init));
  init->qp_context = verbs_qp->qp_context;
  init->send_cq = verbs_qp->send_cq;
  init->recv_cq = verbs_qp->recv_cq;
  init->cap = qp->cap;
  init->qp_type = IBV_QPT_RC;
  init->sq_sig_all = qp->sig_all ? 1 : 0;
  return 0;
}

SOFTVERBS_API int ibv_destroy_qp(ibv_qp* verbs_qp) {
  Qp* qp = owner_of<Qp>(verbs_qp);
  if (qp == nullptr) return EINVAL;
  std::shared_ptr<Qp> keep = qp->shared_from_this();
  {
    std::lock_guard<std::mutex> lock(qp->mu);
    if (qp->destroyed) return EINVAL;
    qp->destroyed = true;
    qp->sq.clear();
    qp->rq.clear();
  }
  // Like hardware providers, drop the QP's completions still in its CQs.
  qp->send_cq->purge(qp);
  if (qp->recv_cq != qp->send_cq) qp->recv_cq->purge(qp);
  registry_remove_qp(qp->qpn);
  qp->nic->remove_qp(qp->qpn);
  qp->pd->users.fetch_sub(1);
  qp->send_cq->users.fetch_sub(1);
  qp->recv_cq->users.fetch_sub(1);
  pthread_mutex_destroy(&verbs_qp->mutex);
  pthread_cond_destroy(&verbs_qp->cond);
  return 0;
}

SOFTVERBS_API int ibv_query_ece(ibv_qp* verbs_qp, ibv_ece* ece) {
  Qp* qp = owner_of<Qp>(verbs_qp);
  if (qp == nullptr || ece == nullptr) return EINVAL;
  std::lock_guard<std::mutex> lock(qp->mu);
  if (!qp->ece_supported) return EOPNOTSUPP;
  ece->vendor_id = SOFTVERBS_ECE_VENDOR_ID;
  ece->options = qp->ece_options;
  ece->comp_mask = 0;
  return 0;
}

SOFTVERBS_API int ibv_set_ece(ibv_qp* verbs_qp, ibv_ece* ece) {
  Qp* qp = owner_of<Qp>(verbs_qp);
  if (qp == nullptr || ece == nullptr) return EINVAL;
  const uint32_t offered = static_cast<uint32_t>(env_long("SOFTVERBS_ECE", 0));
  std::lock_guard<std::mutex> lock(qp->mu);
  if (!qp->ece_supported) return EOPNOTSUPP;
  if (ece->vendor_id != SOFTVERBS_ECE_VENDOR_ID || ece->comp_mask != 0 ||
      (ece->options & ~offered) != 0 || (qp->state != IBV_QPS_RESET && qp->state != IBV_QPS_INIT)) {
    return EINVAL;
  }
  qp->ece_options = ece->options;
  count(kEceSet);
  return 0;
}

// --------------------------------------------------------------- events ----
SOFTVERBS_API int ibv_get_async_event(ibv_context* verbs_ctx, ibv_async_event* event) {
  Context* context = context_of(verbs_ctx);
  uint64_t v = 0;
  // Blocks (unless the caller made async_fd non-blocking) until one is queued.
  if (read(verbs_ctx->async_fd, &v, sizeof(v)) != static_cast<ssize_t>(sizeof(v))) return -1;
  std::lock_guard<std::mutex> lock(context->mu);
  if (context->events.empty()) {
    errno = EAGAIN;
    return -1;
  }
  *event = context->events.front();
  context->events.pop_front();
  return 0;
}

SOFTVERBS_API void ibv_ack_async_event(ibv_async_event* /*event*/) {}

SOFTVERBS_API const char* ibv_wc_status_str(ibv_wc_status status) {
  if (status < 0 || static_cast<size_t>(status) >= std::size(kWcStatusText)) return "unknown";
  return kWcStatusText[status];
}

SOFTVERBS_API const char* ibv_event_type_str(ibv_event_type event) {
  if (event < 0 || static_cast<size_t>(event) >= std::size(kEventText)) return "unknown";
  return kEventText[event];
}

SOFTVERBS_API const char* ibv_port_state_str(ibv_port_state state) {
  static const char* kText[] = {"PORT_NOP",   "PORT_DOWN",   "PORT_INIT",
                                "PORT_ARMED", "PORT_ACTIVE", "PORT_ACTIVE_DEFER"};
  if (state < 0 || static_cast<size_t>(state) >= std::size(kText)) return "invalid state";
  return kText[state];
}

SOFTVERBS_API const char* ibv_node_type_str(ibv_node_type type) {
  switch (type) {
    case IBV_NODE_CA:
      return "InfiniBand channel adapter";
    case IBV_NODE_SWITCH:
      return "InfiniBand switch";
    case IBV_NODE_ROUTER:
      return "InfiniBand router";
    case IBV_NODE_RNIC:
      return "iWARP NIC";
    default:
      return "unknown";
  }
}

SOFTVERBS_API int ibv_fork_init(void) {
  return 0;
}

SOFTVERBS_API ibv_fork_status ibv_is_fork_initialized(void) {
  return IBV_FORK_UNNEEDED;
}

// -------------------------------------------------------------- controls ---
SOFTVERBS_API int softverbs_get_counters(softverbs_counters* out) {
  if (out == nullptr) return -1;
  read_counters(out);
  return 0;
}

SOFTVERBS_API void softverbs_reset_counters(void) {
  reset_counters();
}

SOFTVERBS_API int softverbs_present(void) {
  return 1;
}
