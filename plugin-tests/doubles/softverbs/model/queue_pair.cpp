// RC queue pairs: the completions their work requests end with, and the
// flush that entering ERR does.

#include "queue_pair.h"

#include <pthread.h>

#include <cerrno>

#include "completion.h"
#include "context.h"
#include "counters.h"
#include "env.h"
#include "limits.h"
#include "nic.h"
#include "registry.h"
#include "status_text.h"

namespace softverbs {

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

std::shared_ptr<Qp> make_qp(Pd* pd, Cq* send_cq, Cq* recv_cq, const ibv_qp_cap& cap, bool sig_all,
                            void* qp_context, QpType type) {
  Context* context = pd->context.get();
  if (!take_object(LimitedObject::kQp)) return nullptr;
  auto qp = std::make_shared<Qp>();
  qp->handle.owner = qp.get();
  qp->type = type;
  qp->context = pd->context;
  qp->nic = context->nic;
  qp->pd = pd;
  qp->send_cq = send_cq;
  qp->recv_cq = recv_cq;
  qp->sig_all = sig_all;
  qp->cap = cap;
  qp->qpn = registry_create_qp(context->nic->path(), context->info());
  if (qp->qpn == 0) {
    release_object(LimitedObject::kQp);
    errno = ENOMEM;
    return nullptr;
  }
  ibv_qp& v = qp->handle.verbs;
  v.context = context->verbs();
  v.qp_context = qp_context;
  v.pd = &pd->handle.verbs;
  v.send_cq = send_cq->verbs();
  v.recv_cq = recv_cq->verbs();
  v.handle = qp->qpn;
  v.qp_num = qp->qpn;
  v.state = IBV_QPS_RESET;
  v.qp_type = type == QpType::kSrd ? IBV_QPT_DRIVER : IBV_QPT_RC;
  pthread_mutex_init(&v.mutex, nullptr);
  pthread_cond_init(&v.cond, nullptr);
  pd->users.fetch_add(1);
  send_cq->users.fetch_add(1);
  recv_cq->users.fetch_add(1);
  context->nic->add_qp(qp);
  return qp;
}

void count_completed_bytes(const SendWr& wr) {
  switch (wr.opcode) {
    case IBV_WR_RDMA_WRITE:
    case IBV_WR_RDMA_WRITE_WITH_IMM:
      count(kBytesWritten, wr.length);
      break;
    case IBV_WR_RDMA_READ:
      count(kBytesRead, wr.length);
      break;
    default:
      count(kBytesSent, wr.length);
      break;
  }
}

bool enqueue_send(Qp& qp, SendWr wr) {
  count(kSendWrs);
  static constexpr Counter kByOpcode[] = {kSendWrsWrite, kSendWrsWriteImm, kSendWrsSend,
                                          kSendWrsSendImm, kSendWrsRead};
  count(kByOpcode[wr.opcode]);
  if (wr.signaled) count(kSignaledWrs);
  wr.index = qp.sq_posted++;
  wr.psn = qp.next_psn;
  qp.next_psn = (qp.next_psn + 1) & 0xffffff;
  if (qp.state == IBV_QPS_ERR) {
    push_send_cqe(qp, wr, IBV_WC_WR_FLUSH_ERR);
    return false;
  }
  qp.sq.push_back(std::move(wr));
  return true;
}

namespace {

// A send WR's completion with the vendor error given (0 on success).
void push_send_entry(Qp& qp, const SendWr& wr, ibv_wc_status status, uint32_t vendor_err) {
  Cqe cqe;
  cqe.wc.wr_id = wr.wr_id;
  cqe.wc.status = status;
  cqe.wc.opcode = send_wc_opcode(wr.opcode);
  cqe.wc.byte_len = status == IBV_WC_SUCCESS ? static_cast<uint32_t>(wr.length) : 0;
  cqe.wc.qp_num = qp.qpn;
  cqe.wc.vendor_err = status == IBV_WC_SUCCESS ? 0 : vendor_err;
  cqe.qp = &qp;
  cqe.retired = &qp.sq_retired;
  cqe.index = wr.index;
  cqe.unordered = qp.type == QpType::kSrd;
  qp.send_cq->push(cqe);
}

}  // namespace

void push_send_cqe(Qp& qp, const SendWr& wr, ibv_wc_status status) {
  if (status != IBV_WC_SUCCESS && status != IBV_WC_WR_FLUSH_ERR) {
    log("QP %u send wr_id %#llx: %s", qp.qpn, static_cast<unsigned long long>(wr.wr_id),
        wc_status_text(status));
  }
  uint32_t vendor_err = 0x100 + status;
  if (qp.type == QpType::kSrd) {
    vendor_err = status == IBV_WC_WR_FLUSH_ERR ? 1 : 2;  // FLUSHED, QP_INTERNAL_ERROR
  }
  push_send_entry(qp, wr, status, vendor_err);
}

void push_srd_send_cqe(Qp& qp, const SendWr& wr, ibv_wc_status status, uint32_t vendor_err) {
  if (status != IBV_WC_SUCCESS) {
    log("QP %u send wr_id %#llx: %s (EFA status %u)", qp.qpn,
        static_cast<unsigned long long>(wr.wr_id), wc_status_text(status), vendor_err);
  }
  push_send_entry(qp, wr, status, vendor_err);
}

void push_recv_cqe(Qp& qp, const RecvWr& wr, ibv_wc_status status) {
  if (status != IBV_WC_SUCCESS && status != IBV_WC_WR_FLUSH_ERR) {
    log("QP %u recv wr_id %#llx: %s", qp.qpn, static_cast<unsigned long long>(wr.wr_id),
        wc_status_text(status));
  }
  Cqe cqe;
  cqe.wc.wr_id = wr.wr_id;
  cqe.wc.status = status;
  cqe.wc.opcode = IBV_WC_RECV;
  cqe.wc.qp_num = qp.qpn;
  cqe.wc.vendor_err = status == IBV_WC_SUCCESS ? 0 : 0x100 + status;
  cqe.qp = &qp;
  cqe.retired = &qp.rq_retired;
  cqe.index = wr.index;
  cqe.unordered = qp.type == QpType::kSrd;
  if (qp.type == QpType::kSrd && status != IBV_WC_SUCCESS) {
    cqe.wc.vendor_err = status == IBV_WC_WR_FLUSH_ERR ? 1 : 2;
  }
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

}  // namespace softverbs
