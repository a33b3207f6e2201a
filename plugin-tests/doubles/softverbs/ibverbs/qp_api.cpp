// Queue pairs: creation, the state machine's entry point, queries, destruction
// and Enhanced Connection Establishment.

#include <pthread.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <mutex>

#include "ibverbs/api.h"
#include "model/completion.h"
#include "model/context.h"
#include "model/counters.h"
#include "model/device.h"
#include "model/env.h"
#include "model/limits.h"
#include "model/nic.h"
#include "model/qp_state.h"
#include "model/queue_pair.h"
#include "model/registry.h"

using namespace softverbs;

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
  if (init->srq != nullptr || context_of(verbs_pd->context)->info().efa) {
    errno = EOPNOTSUPP;  // EFA devices have SRD QPs only (efadv_create_qp_ex)
    return nullptr;
  }
  Cq* send_cq = cq_of(init->send_cq);
  Cq* recv_cq = cq_of(init->recv_cq);
  Context* context = context_of(verbs_pd->context);
  const ibv_qp_cap& cap = init->cap;
  if (send_cq == nullptr || recv_cq == nullptr || send_cq->context != context ||
      recv_cq->context != context || cap.max_send_wr > kMaxQpWr || cap.max_recv_wr > kMaxQpWr ||
      cap.max_send_sge > kMaxSge || cap.max_recv_sge > kMaxSge ||
      cap.max_inline_data > kMaxInline) {
    errno = EINVAL;
    return nullptr;
  }
  auto qp =
      make_qp(pd, send_cq, recv_cq, cap, init->sq_sig_all != 0, init->qp_context, QpType::kRc);
  if (!qp) return nullptr;
  qp->ece_options = static_cast<uint32_t>(env_long("SOFTVERBS_ECE", 0));
  qp->ece_supported = qp->ece_options != 0;
  return &qp->handle.verbs;
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
  init->qp_type = verbs_qp->qp_type;
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
  release_object(LimitedObject::kQp);
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

SOFTVERBS_API ibv_qp_ex* ibv_qp_to_qp_ex(ibv_qp* verbs_qp) {
  Qp* qp = owner_of<Qp>(verbs_qp);
  return qp == nullptr ? nullptr : static_cast<ibv_qp_ex*>(qp->ex.get());
}

namespace {

// rdma-core's flags and capabilities of ibv_query_qp_data_in_order (newer
// than the headers of rdma-core 44).
constexpr uint32_t kInOrderReturnCaps = 1u << 0;
constexpr int kInOrderWholeMessage = 1 << 0;
constexpr int kInOrderAligned128 = 1 << 1;

}  // namespace

// RC: the NIC places a message's bytes in order. SRD: only what the device
// claims (SOFTEFA_IN_ORDER_128: 128-byte aligned blocks of RDMA and sends).
SOFTVERBS_API int ibv_query_qp_data_in_order(ibv_qp* verbs_qp, ibv_wr_opcode op, uint32_t flags) {
  Qp* qp = owner_of<Qp>(verbs_qp);
  if (qp == nullptr) return 0;
  bool return_caps = (flags & kInOrderReturnCaps) != 0;
  if (qp->type == QpType::kRc) return return_caps ? kInOrderWholeMessage : 1;
  bool aligned = qp->context->info().efa_caps.in_order_128 &&
                 (op == IBV_WR_RDMA_WRITE || op == IBV_WR_RDMA_WRITE_WITH_IMM ||
                  op == IBV_WR_RDMA_READ || op == IBV_WR_SEND || op == IBV_WR_SEND_WITH_IMM);
  return return_caps && aligned ? kInOrderAligned128 : 0;
}
