// SRD QPs: efadv_create_qp_ex (and efadv_create_driver_qp), and the
// ibv_qp_ex functions libfabric posts with: wr_start, one opcode call per WR
// followed by its buffers and its destination, then wr_complete, which
// queues the batch on the QP and kicks the NIC.

#include <cerrno>
#include <cstring>
#include <memory>
#include <mutex>

#include "efa/efa.h"
#include "ibverbs/api.h"
#include "ibverbs/data_path.h"
#include "model/counters.h"
#include "model/device.h"
#include "model/memory.h"
#include "model/nic.h"

namespace softverbs::efa {

namespace {

constexpr uint32_t kEfaLocalBadLength = 6;
constexpr uint32_t kEfaInvalidLkey = 5;
constexpr uint32_t kEfaQpInternalError = 2;

QpEx& ex_of(ibv_qp_ex* qp) {
  return *reinterpret_cast<QpEx*>(qp);
}

// The WR the last opcode call started; null (and the batch failed) when none.
SendWr* current(QpEx& q) {
  if (q.batch.empty()) {
    if (q.error == 0) q.error = EINVAL;
    return nullptr;
  }
  return &q.batch.back();
}

void begin(ibv_qp_ex* verbs_qp, ibv_wr_opcode opcode) {
  QpEx& q = ex_of(verbs_qp);
  const EfaCaps& caps = q.qp->context->info().efa_caps;
  bool rdma_read = opcode == IBV_WR_RDMA_READ;
  bool rdma_write = opcode == IBV_WR_RDMA_WRITE || opcode == IBV_WR_RDMA_WRITE_WITH_IMM;
  if ((rdma_read && !caps.rdma_read) || (rdma_write && !caps.rdma_write)) {
    if (q.error == 0) q.error = EOPNOTSUPP;
  }
  SendWr wr;
  wr.wr_id = verbs_qp->wr_id;
  wr.opcode = opcode;
  wr.signaled = q.qp->sig_all || (verbs_qp->wr_flags & IBV_SEND_SIGNALED) != 0;
  q.batch.push_back(std::move(wr));
}

void wr_start(ibv_qp_ex* qp) {
  QpEx& q = ex_of(qp);
  q.batch.clear();
  q.error = 0;
}

void wr_send(ibv_qp_ex* qp) {
  begin(qp, IBV_WR_SEND);
}

void wr_send_imm(ibv_qp_ex* qp, __be32 imm) {
  begin(qp, IBV_WR_SEND_WITH_IMM);
  ex_of(qp).batch.back().imm = imm;
}

void wr_rdma(ibv_qp_ex* qp, ibv_wr_opcode opcode, uint32_t rkey, uint64_t remote_addr) {
  begin(qp, opcode);
  SendWr& wr = ex_of(qp).batch.back();
  wr.rkey = rkey;
  wr.remote_addr = remote_addr;
}

void wr_rdma_read(ibv_qp_ex* qp, uint32_t rkey, uint64_t remote_addr) {
  wr_rdma(qp, IBV_WR_RDMA_READ, rkey, remote_addr);
}

void wr_rdma_write(ibv_qp_ex* qp, uint32_t rkey, uint64_t remote_addr) {
  wr_rdma(qp, IBV_WR_RDMA_WRITE, rkey, remote_addr);
}

void wr_rdma_write_imm(ibv_qp_ex* qp, uint32_t rkey, uint64_t remote_addr, __be32 imm) {
  wr_rdma(qp, IBV_WR_RDMA_WRITE_WITH_IMM, rkey, remote_addr);
  ex_of(qp).batch.back().imm = imm;
}

void wr_set_sge_list(ibv_qp_ex* verbs_qp, size_t num_sge, const ibv_sge* sges) {
  QpEx& q = ex_of(verbs_qp);
  SendWr* wr = current(q);
  if (wr == nullptr) return;
  if (num_sge > q.qp->cap.max_send_sge || (num_sge > 0 && sges == nullptr)) {
    if (q.error == 0) q.error = EINVAL;
    return;
  }
  for (size_t i = 0; i < num_sge; ++i) {
    wr->length += sges[i].length;
    if (sges[i].length == 0) continue;
    Piece piece = local_piece(*q.qp, sges[i], wr->opcode == IBV_WR_RDMA_READ);
    if (piece.ptr == nullptr && wr->preset == IBV_WC_SUCCESS) {
      wr->preset = IBV_WC_LOC_PROT_ERR;
      wr->preset_vendor = kEfaInvalidLkey;
    }
    wr->pieces.push_back(std::move(piece));
  }
}

void wr_set_sge(ibv_qp_ex* qp, uint32_t lkey, uint64_t addr, uint32_t length) {
  ibv_sge sge{addr, length, lkey};
  wr_set_sge_list(qp, 1, &sge);
}

void wr_set_inline_data_list(ibv_qp_ex* verbs_qp, size_t num_buf, const ibv_data_buf* bufs) {
  QpEx& q = ex_of(verbs_qp);
  SendWr* wr = current(q);
  if (wr == nullptr) return;
  size_t total = 0;
  for (size_t i = 0; i < num_buf; ++i) total += bufs[i].length;
  if (wr->opcode == IBV_WR_RDMA_READ || total > q.qp->cap.max_inline_data) {
    if (q.error == 0) q.error = EINVAL;
    return;
  }
  // Copied now: the caller may reuse the buffers as soon as we return.
  for (size_t i = 0; i < num_buf; ++i) {
    const char* src = static_cast<const char*>(bufs[i].addr);
    wr->inline_data.insert(wr->inline_data.end(), src, src + bufs[i].length);
  }
  wr->length = total;
  count(kInlineWrs);
}

void wr_set_inline_data(ibv_qp_ex* qp, void* addr, size_t length) {
  ibv_data_buf buf{addr, length};
  wr_set_inline_data_list(qp, 1, &buf);
}

void wr_set_ud_addr(ibv_qp_ex* verbs_qp, ibv_ah* verbs_ah, uint32_t remote_qpn,
                    uint32_t remote_qkey) {
  QpEx& q = ex_of(verbs_qp);
  SendWr* wr = current(q);
  Ah* ah = owner_of<Ah>(verbs_ah);
  if (wr == nullptr) return;
  if (ah == nullptr) {
    if (q.error == 0) q.error = EINVAL;
    return;
  }
  q.qp->nic->resolve_srd(remote_qpn & 0xffffff, ah->gid, &wr->dest);
  wr->dest.qkey = remote_qkey;
}

void wr_abort(ibv_qp_ex* qp) {
  ex_of(qp).batch.clear();
}

int wr_complete(ibv_qp_ex* verbs_qp) {
  QpEx& q = ex_of(verbs_qp);
  Qp& qp = *q.qp;
  count(kDoorbells);
  std::vector<SendWr> batch;
  batch.swap(q.batch);
  if (q.error != 0) return q.error;
  const DeviceInfo& info = qp.context->info();
  std::unique_lock<std::mutex> lock(qp.mu);
  if (qp.destroyed || (qp.state != IBV_QPS_RTS && qp.state != IBV_QPS_ERR)) return EINVAL;
  if (qp.sq_posted - qp.sq_retired.load(std::memory_order_acquire) + batch.size() >
      qp.cap.max_send_wr) {
    return ENOMEM;
  }
  bool posted = false;
  for (SendWr& w : batch) {
    bool rdma = w.opcode != IBV_WR_SEND && w.opcode != IBV_WR_SEND_WITH_IMM;
    uint64_t limit = rdma ? info.efa_caps.max_rdma_size : info.max_msg;
    if (w.length > limit && w.preset == IBV_WC_SUCCESS) {
      w.preset = IBV_WC_LOC_LEN_ERR;
      w.preset_vendor = kEfaLocalBadLength;
    }
    ibv_wc_status fault = qp.nic->on_send_posted();
    if (fault != IBV_WC_SUCCESS && w.preset == IBV_WC_SUCCESS) {
      w.preset = fault;
      w.preset_vendor = kEfaQpInternalError;
    }
    if (enqueue_send(qp, std::move(w))) posted = true;
  }
  lock.unlock();
  if (posted) qp.nic->kick(qp);
  return 0;
}

}  // namespace

ibv_qp* create_srd_qp(ibv_context* verbs_ctx, ibv_qp_init_attr_ex* attr, uint16_t flags) {
  Context* context = context_of(verbs_ctx);
  if (context == nullptr || attr == nullptr || (attr->comp_mask & IBV_QP_INIT_ATTR_PD) == 0) {
    errno = EINVAL;
    return nullptr;
  }
  const DeviceInfo& info = context->info();
  const EfaCaps& caps = info.efa_caps;
  if (!info.efa || attr->srq != nullptr) {
    errno = EOPNOTSUPP;
    return nullptr;
  }
  uint64_t ops =
      (attr->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS) != 0 ? attr->send_ops_flags : 0;
  if (((ops & IBV_QP_EX_WITH_RDMA_READ) != 0 && !caps.rdma_read) ||
      ((ops & (IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM)) != 0 &&
       !caps.rdma_write) ||
      ((flags & kQpFlagUnsolicitedWriteRecv) != 0 && !caps.unsolicited_write_recv) ||
      (flags & ~kQpFlagUnsolicitedWriteRecv) != 0) {
    errno = EOPNOTSUPP;
    return nullptr;
  }
  Pd* pd = owner_of<Pd>(attr->pd);
  Cq* send_cq = cq_of(attr->send_cq);
  Cq* recv_cq = cq_of(attr->recv_cq);
  const ibv_qp_cap& cap = attr->cap;
  if (pd == nullptr || send_cq == nullptr || recv_cq == nullptr || send_cq->context != context ||
      recv_cq->context != context || cap.max_send_wr > caps.max_sq_wr ||
      cap.max_recv_wr > caps.max_rq_wr || cap.max_send_sge > caps.max_sq_sge ||
      cap.max_recv_sge > caps.max_rq_sge || cap.max_inline_data > caps.inline_buf_size) {
    errno = EINVAL;
    return nullptr;
  }
  auto qp =
      make_qp(pd, send_cq, recv_cq, cap, attr->sq_sig_all != 0, attr->qp_context, QpType::kSrd);
  if (!qp) return nullptr;
  qp->unsolicited_write_recv = (flags & kQpFlagUnsolicitedWriteRecv) != 0;
  auto ex = std::make_shared<QpEx>();
  ex->qp = qp.get();
  ibv_qp_ex& v = ex->ex;
  v.qp_base = qp->handle.verbs;
  v.comp_mask = 0;
  v.wr_rdma_read = wr_rdma_read;
  v.wr_rdma_write = wr_rdma_write;
  v.wr_rdma_write_imm = wr_rdma_write_imm;
  v.wr_send = wr_send;
  v.wr_send_imm = wr_send_imm;
  v.wr_set_ud_addr = wr_set_ud_addr;
  v.wr_set_inline_data = wr_set_inline_data;
  v.wr_set_inline_data_list = wr_set_inline_data_list;
  v.wr_set_sge = wr_set_sge;
  v.wr_set_sge_list = wr_set_sge_list;
  v.wr_start = wr_start;
  v.wr_complete = wr_complete;
  v.wr_abort = wr_abort;
  qp->ex = ex;
  return &qp->handle.verbs;
}

// ibv_create_qp_ex: EFA makes SRD QPs through efadv only; UD is not modelled.
ibv_qp* create_qp_ex(ibv_context* /*context*/, ibv_qp_init_attr_ex* /*attr*/) {
  errno = EOPNOTSUPP;
  return nullptr;
}

}  // namespace softverbs::efa

using namespace softverbs;
using namespace softverbs::efa;

SOFTVERBS_API ibv_qp* efadv_create_qp_ex(ibv_context* context, ibv_qp_init_attr_ex* attr_ex,
                                         efadv_qp_init_attr* efa_attr, uint32_t inlen) {
  if (attr_ex == nullptr || efa_attr == nullptr || inlen < offsetof(QpInitAttr, flags)) {
    errno = EINVAL;
    return nullptr;
  }
  QpInitAttr a{};
  std::memcpy(&a, efa_attr, std::min<size_t>(inlen, sizeof(a)));
  if (attr_ex->qp_type != IBV_QPT_DRIVER || a.driver_qp_type != EFADV_QP_DRIVER_TYPE_SRD ||
      a.comp_mask != 0) {
    errno = EOPNOTSUPP;
    return nullptr;
  }
  return create_srd_qp(context, attr_ex, a.flags);
}

SOFTVERBS_API ibv_qp* efadv_create_driver_qp(ibv_pd* pd, ibv_qp_init_attr* attr,
                                             uint32_t driver_qp_type) {
  if (pd == nullptr || attr == nullptr || driver_qp_type != EFADV_QP_DRIVER_TYPE_SRD) {
    errno = EINVAL;
    return nullptr;
  }
  ibv_qp_init_attr_ex ex{};
  ex.qp_context = attr->qp_context;
  ex.send_cq = attr->send_cq;
  ex.recv_cq = attr->recv_cq;
  ex.srq = attr->srq;
  ex.cap = attr->cap;
  ex.qp_type = IBV_QPT_DRIVER;
  ex.sq_sig_all = attr->sq_sig_all;
  ex.comp_mask = IBV_QP_INIT_ATTR_PD;
  ex.pd = pd;
  return create_srd_qp(pd->context, &ex, 0);
}
