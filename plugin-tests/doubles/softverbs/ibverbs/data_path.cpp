// The context ops that rdma-core's inline ibv_post_send, ibv_post_recv,
// ibv_poll_cq and ibv_req_notify_cq call: they turn work requests into the
// model's and hand them to the QP's NIC.

#include "ibverbs/data_path.h"

#include <cerrno>
#include <memory>
#include <mutex>

#include "model/completion.h"
#include "model/counters.h"
#include "model/device.h"
#include "model/env.h"
#include "model/nic.h"
#include "model/queue_pair.h"

namespace softverbs {

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
  // SRD QPs take work through ibv_qp_ex (wr_start .. wr_complete) only.
  if (qp.type == QpType::kSrd) return fail(wr, EOPNOTSUPP);
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
    if (enqueue_send(qp, std::move(w))) posted = true;
  }
  lock.unlock();
  if (posted) qp.nic->kick(qp);
  return 0;
}

int post_recv(ibv_qp* verbs_qp, ibv_recv_wr* wr, ibv_recv_wr** bad_wr) {
  Qp& qp = *owner_of<Qp>(verbs_qp);
  count(kRecvPosts);
  if (qp.type == QpType::kSrd) {
    int n = 0;
    for (ibv_recv_wr* w = wr; w != nullptr; w = w->next) ++n;
    trace("SRD QP %u: %d receives posted", qp.qpn, n);
  }
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
  return cq_of(verbs_cq)->poll(num_entries, wc);
}

int req_notify_cq(ibv_cq* verbs_cq, int /*solicited_only*/) {
  Cq* cq = cq_of(verbs_cq);
  std::lock_guard<std::mutex> lock(cq->mu);
  cq->armed = true;
  return 0;
}

}  // namespace softverbs
