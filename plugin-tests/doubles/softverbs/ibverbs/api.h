// What the ibv_* entry points share. This directory is the libibverbs
// personality of the software NIC in model/: it translates each ibv_* call
// (and the context ops the inline ones call) into the model's objects.
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
#pragma once

#include <atomic>
#include <cstdint>

// Exported (the rest of the library is hidden); libibverbs.map versions it.
#define SOFTVERBS_API extern "C" __attribute__((visibility("default")))

namespace softverbs {

// The `handle` field of the next PD, MR or CQ.
inline uint32_t next_handle() {
  static std::atomic<uint32_t> next{1};
  return next.fetch_add(1);
}

}  // namespace softverbs
