// The EFA personality's device side: linking it into the library turns the
// devices into EFA devices (softefa0..), and each opened context gets the
// extended CQ and QP ops. efadv_query_device and efadv_query_ah.

#include <cerrno>
#include <cstring>

#include "efa/efa.h"
#include "ibverbs/api.h"
#include "model/device.h"
#include "model/lifecycle.h"
#include "model/memory.h"

namespace softverbs::efa {

namespace {

void extend_context(Context* context) {
  verbs_context& vctx = context->handle.verbs;
  vctx.create_cq_ex = create_cq_ex;
  vctx.create_qp_ex = create_qp_ex;
}

// Runs when the library loads, before any ibv_get_device_list.
struct Register {
  Register() {
    set_device_flavour(Flavour::kEfa);
    set_context_extension(extend_context);
  }
};
Register g_register;

}  // namespace

}  // namespace softverbs::efa

using namespace softverbs;
using namespace softverbs::efa;

// EOPNOTSUPP is how libfabric tells a non-EFA device.
SOFTVERBS_API int efadv_query_device(ibv_context* verbs_ctx, efadv_device_attr* attr,
                                     uint32_t inlen) {
  Context* context = context_of(verbs_ctx);
  if (context == nullptr || attr == nullptr) return EINVAL;
  const DeviceInfo& info = context->info();
  if (!info.efa) return EOPNOTSUPP;
  const EfaCaps& caps = info.efa_caps;
  efadv_device_attr a{};
  a.max_sq_wr = caps.max_sq_wr;
  a.max_rq_wr = caps.max_rq_wr;
  a.max_sq_sge = caps.max_sq_sge;
  a.max_rq_sge = caps.max_rq_sge;
  a.inline_buf_size = caps.inline_buf_size;
  a.device_caps = (caps.rdma_read ? kCapRdmaRead : 0) | (caps.rnr_retry ? kCapRnrRetry : 0) |
                  (caps.cq_with_sgid ? kCapCqWithSgid : 0) | (caps.rdma_write ? kCapRdmaWrite : 0) |
                  (caps.unsolicited_write_recv ? kCapUnsolicitedWriteRecv : 0);
  a.max_rdma_size = caps.rdma_read || caps.rdma_write ? caps.max_rdma_size : 0;
  std::memset(attr, 0, inlen);
  std::memcpy(attr, &a, std::min<size_t>(inlen, sizeof(a)));
  return 0;
}

SOFTVERBS_API int efadv_query_ah(ibv_ah* verbs_ah, efadv_ah_attr* attr, uint32_t inlen) {
  Ah* ah = owner_of<Ah>(verbs_ah);
  if (ah == nullptr || attr == nullptr || inlen < offsetof(efadv_ah_attr, reserved)) return EINVAL;
  std::memset(attr, 0, inlen);
  attr->ahn = ah->ahn;
  return 0;
}
