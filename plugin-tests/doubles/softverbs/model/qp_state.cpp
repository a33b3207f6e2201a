// The RC queue pair state machine: which attributes each transition takes
// (as the IB spec and the kernel's table have them), and what entering a
// state does.

#include "qp_state.h"

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "completion.h"
#include "context.h"
#include "nic.h"
#include "process.h"
#include "queue_pair.h"
#include "registry.h"

namespace softverbs {

namespace {

constexpr int kAccessBits = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
                            IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;

// Required and optional attribute masks of an RC transition, as the IB spec
// (and the kernel's table) has them; false when the transition is illegal.
// SRD (EFA) follows the UD table, with the RNR retry count EFA adds.
bool srd_transition(ibv_qp_state from, ibv_qp_state to, int* required, int* optional) {
  *required = 0;
  *optional = 0;
  if (to == IBV_QPS_RESET || to == IBV_QPS_ERR) return true;
  if (from == IBV_QPS_RESET && to == IBV_QPS_INIT) {
    *required = IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY;
    return true;
  }
  if (from == IBV_QPS_INIT && to == IBV_QPS_INIT) {
    *optional = IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY;
    return true;
  }
  if (from == IBV_QPS_INIT && to == IBV_QPS_RTR) {
    *optional = IBV_QP_QKEY;
    return true;
  }
  if (from == IBV_QPS_RTR && to == IBV_QPS_RTS) {
    *required = IBV_QP_SQ_PSN;
    *optional = IBV_QP_QKEY | IBV_QP_RNR_RETRY;
    return true;
  }
  if (from == IBV_QPS_RTS && to == IBV_QPS_RTS) {
    *optional = IBV_QP_QKEY | IBV_QP_RNR_RETRY;
    return true;
  }
  return false;
}

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

}  // namespace

int modify_qp(Qp& qp, ibv_qp_attr* attr, int mask) {
  std::unique_lock<std::mutex> lock(qp.mu);
  if (qp.destroyed || attr == nullptr) return EINVAL;
  const DeviceInfo& info = qp.context->info();
  ibv_qp_state from = qp.state;
  if ((mask & IBV_QP_CUR_STATE) != 0 && attr->cur_qp_state != from) return EINVAL;
  ibv_qp_state to = (mask & IBV_QP_STATE) != 0 ? attr->qp_state : from;
  int required = 0;
  int optional = 0;
  const bool srd = qp.type == QpType::kSrd;
  if (!(srd ? srd_transition : transition)(from, to, &required, &optional)) return EINVAL;
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
  if ((mask & IBV_QP_QKEY) != 0) qp.qkey = attr->qkey;

  bool kick = false;
  if (to == IBV_QPS_RESET) {
    reset_qp(qp);
  } else if (to == IBV_QPS_ERR) {
    enter_error(qp);
  } else if (srd) {
    // Connectionless: every WR names its destination.
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

}  // namespace softverbs
