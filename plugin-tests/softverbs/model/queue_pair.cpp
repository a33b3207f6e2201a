// RC queue pairs: the completions their work requests end with, and the
// flush that entering ERR does.

#include "queue_pair.h"

#include "completion.h"
#include "env.h"
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

void push_send_cqe(Qp& qp, const SendWr& wr, ibv_wc_status status) {
  if (status != IBV_WC_SUCCESS && status != IBV_WC_WR_FLUSH_ERR) {
    log("QP %u send wr_id %#llx: %s", qp.qpn, static_cast<unsigned long long>(wr.wr_id),
        wc_status_text(status));
  }
  Cqe cqe;
  cqe.wc.wr_id = wr.wr_id;
  cqe.wc.status = status;
  cqe.wc.opcode = send_wc_opcode(wr.opcode);
  cqe.wc.byte_len = status == IBV_WC_SUCCESS ? static_cast<uint32_t>(wr.length) : 0;
  cqe.wc.qp_num = qp.qpn;
  cqe.wc.vendor_err = status == IBV_WC_SUCCESS ? 0 : 0x100 + status;
  cqe.qp = &qp;
  cqe.retired = &qp.sq_retired;
  cqe.index = wr.index;
  qp.send_cq->push(cqe);
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
