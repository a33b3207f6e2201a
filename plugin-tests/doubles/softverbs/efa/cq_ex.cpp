// Extended CQs: efadv_create_cq (with the sender's GID and the unsolicited
// flag) and ibv_create_cq_ex, and the ibv_cq_ex poll functions over the
// model's CQ: start_poll / next_poll take one entry, the read_* functions read
// it.

#include <pthread.h>

#include <cerrno>
#include <cstring>
#include <memory>

#include "efa/efa.h"
#include "ibverbs/api.h"
#include "model/counters.h"
#include "model/device.h"

namespace softverbs::efa {

namespace {

CqExt& ext_of(ibv_cq_ex* cq) {
  return *static_cast<CqExt*>(owner_of<Cq>(cq)->ext.get());
}

CqExt& ext_of(efadv_cq* cq) {
  return *reinterpret_cast<CqExt*>(cq);
}

int take(ibv_cq_ex* verbs_cq) {
  CqExt& ext = ext_of(verbs_cq);
  if (ext.cq->poll(1, &ext.current) != 1) return ENOENT;
  verbs_cq->status = ext.current.wc.status;
  verbs_cq->wr_id = ext.current.wc.wr_id;
  return 0;
}

int start_poll(ibv_cq_ex* cq, ibv_poll_cq_attr* /*attr*/) {
  count(kPollCalls);
  return take(cq);
}

int next_poll(ibv_cq_ex* cq) {
  return take(cq);
}

void end_poll(ibv_cq_ex* /*cq*/) {}

const ibv_wc& current(ibv_cq_ex* cq) {
  return ext_of(cq).current.wc;
}

ibv_wc_opcode read_opcode(ibv_cq_ex* cq) {
  return current(cq).opcode;
}
uint32_t read_vendor_err(ibv_cq_ex* cq) {
  return current(cq).vendor_err;
}
uint32_t read_byte_len(ibv_cq_ex* cq) {
  return current(cq).byte_len;
}
__be32 read_imm_data(ibv_cq_ex* cq) {
  return current(cq).imm_data;
}
uint32_t read_qp_num(ibv_cq_ex* cq) {
  return current(cq).qp_num;
}
uint32_t read_src_qp(ibv_cq_ex* cq) {
  return current(cq).src_qp;
}
unsigned int read_wc_flags(ibv_cq_ex* cq) {
  return current(cq).wc_flags;
}
uint32_t read_slid(ibv_cq_ex* cq) {
  return current(cq).slid;
}
uint8_t read_sl(ibv_cq_ex* /*cq*/) {
  return 0;
}
uint8_t read_dlid_path_bits(ibv_cq_ex* /*cq*/) {
  return 0;
}

// The sender's GID, for receives from senders the receiver has no AH for.
int wc_read_sgid(efadv_cq* cq, ibv_gid* sgid) {
  const Cqe& e = ext_of(cq).current;
  bool is_recv = (e.wc.opcode & IBV_WC_RECV) != 0;
  if (!is_recv || e.wc.slid != 0xffff) return ENOENT;
  *sgid = e.sgid;
  return 0;
}

bool wc_is_unsolicited(efadv_cq* cq) {
  return ext_of(cq).current.unsolicited;
}

ibv_cq_ex* make_cq(ibv_context* verbs_ctx, ibv_cq_init_attr_ex* attr, bool is_efadv) {
  Context* context = context_of(verbs_ctx);
  if (context == nullptr || attr == nullptr || attr->cqe < 1 ||
      attr->cqe > static_cast<uint32_t>(kMaxCqe) ||
      attr->comp_vector >= static_cast<uint32_t>(verbs_ctx->num_comp_vectors)) {
    errno = EINVAL;
    return nullptr;
  }
  auto* cq = new Cq();
  cq->handle.owner = cq;
  cq->context = context;
  cq->channel = owner_of<Channel>(attr->channel);
  if (cq->channel != nullptr) cq->channel->users.fetch_add(1);
  cq->depth = static_cast<int>(attr->cqe);
  cq->reorder_window = context->reorder_window;
  cq->rng.seed(context->reorder_seed);
  auto ext = std::make_shared<CqExt>();
  ext->cq = cq;
  ext->is_efadv = is_efadv;
  ext->dv.wc_read_sgid = wc_read_sgid;
  ext->dv.wc_is_unsolicited = wc_is_unsolicited;
  cq->ext = ext;
  ibv_cq_ex& v = cq->handle.verbs;
  v.context = verbs_ctx;
  v.channel = attr->channel;
  v.cq_context = attr->cq_context;
  v.handle = next_handle();
  v.cqe = static_cast<int>(attr->cqe);
  pthread_mutex_init(&v.mutex, nullptr);
  pthread_cond_init(&v.cond, nullptr);
  v.start_poll = start_poll;
  v.next_poll = next_poll;
  v.end_poll = end_poll;
  v.read_opcode = read_opcode;
  v.read_vendor_err = read_vendor_err;
  v.read_byte_len = read_byte_len;
  v.read_imm_data = read_imm_data;
  v.read_qp_num = read_qp_num;
  v.read_src_qp = read_src_qp;
  v.read_wc_flags = read_wc_flags;
  v.read_slid = read_slid;
  v.read_sl = read_sl;
  v.read_dlid_path_bits = read_dlid_path_bits;
  return &v;
}

}  // namespace

ibv_cq_ex* create_cq_ex(ibv_context* context, ibv_cq_init_attr_ex* attr) {
  return make_cq(context, attr, false);
}

}  // namespace softverbs::efa

using namespace softverbs;
using namespace softverbs::efa;

SOFTVERBS_API ibv_cq_ex* efadv_create_cq(ibv_context* verbs_ctx, ibv_cq_init_attr_ex* attr_ex,
                                         efadv_cq_init_attr* efa_attr, uint32_t inlen) {
  Context* context = context_of(verbs_ctx);
  if (context == nullptr || efa_attr == nullptr || inlen < sizeof(efadv_cq_init_attr)) {
    errno = EINVAL;
    return nullptr;
  }
  const EfaCaps& caps = context->info().efa_caps;
  uint64_t flags = efa_attr->wc_flags;
  if (!context->info().efa || efa_attr->comp_mask != 0 ||
      (flags & ~(kWcWithSgid | kWcWithIsUnsolicited)) != 0 ||
      ((flags & kWcWithSgid) != 0 && !caps.cq_with_sgid) ||
      ((flags & kWcWithIsUnsolicited) != 0 && !caps.unsolicited_write_recv)) {
    errno = EOPNOTSUPP;
    return nullptr;
  }
  // Newer attribute layouts (external CQ memory) are not modelled.
  for (uint32_t i = sizeof(efadv_cq_init_attr); i < inlen; ++i) {
    if (reinterpret_cast<const uint8_t*>(efa_attr)[i] != 0) {
      errno = EOPNOTSUPP;
      return nullptr;
    }
  }
  return make_cq(verbs_ctx, attr_ex, true);
}

SOFTVERBS_API efadv_cq* efadv_cq_from_ibv_cq_ex(ibv_cq_ex* verbs_cq) {
  Cq* cq = owner_of<Cq>(verbs_cq);
  if (cq == nullptr || !cq->ext) return nullptr;
  auto* ext = static_cast<CqExt*>(cq->ext.get());
  return ext->is_efadv ? reinterpret_cast<efadv_cq*>(&ext->dv) : nullptr;
}
