// The context ops that rdma-core's inline ibv_post_send, ibv_post_recv,
// ibv_poll_cq and ibv_req_notify_cq call through ibv_context.ops.
#pragma once

#include <infiniband/verbs.h>

#include "model/memory.h"

namespace softverbs {

class Qp;

// Resolves an sge to local memory; ptr is nullptr when the lkey does not
// cover it (or lacks local write when `need_write`).
Piece local_piece(Qp& qp, const ibv_sge& sge, bool need_write);

int post_send(ibv_qp* verbs_qp, ibv_send_wr* wr, ibv_send_wr** bad_wr);
int post_recv(ibv_qp* verbs_qp, ibv_recv_wr* wr, ibv_recv_wr** bad_wr);
int poll_cq(ibv_cq* verbs_cq, int num_entries, ibv_wc* wc);
int req_notify_cq(ibv_cq* verbs_cq, int solicited_only);

}  // namespace softverbs
