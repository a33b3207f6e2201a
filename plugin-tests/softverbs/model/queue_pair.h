// RC queue pairs: their attributes, their send and receive queues, and the
// completions their work requests end with.
#pragma once

#include <infiniband/verbs.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <vector>

#include "handle.h"
#include "memory.h"

namespace softverbs {

using Clock = std::chrono::steady_clock;

class Context;
class Cq;
class Nic;
struct Peer;

struct SendWr {
  uint64_t wr_id = 0;
  uint64_t index = 0;
  uint32_t psn = 0;
  ibv_wr_opcode opcode = IBV_WR_SEND;
  bool signaled = false;
  uint32_t imm = 0;
  uint64_t remote_addr = 0;
  uint32_t rkey = 0;
  uint64_t length = 0;
  std::vector<Piece> pieces;
  std::vector<char> inline_data;
  ibv_wc_status preset = IBV_WC_SUCCESS;  // fails when it reaches the head
  int rnr_tries = 0;
  bool dropping = false;  // the target dropped it; fail at drop_since+retry
  Clock::time_point drop_since{};
};

struct RecvWr {
  uint64_t wr_id = 0;
  uint64_t index = 0;
  uint64_t capacity = 0;
  std::vector<Piece> pieces;
  ibv_wc_status preset = IBV_WC_SUCCESS;
};

class Qp : public std::enable_shared_from_this<Qp> {
 public:
  Handle<ibv_qp, Qp> handle{};
  std::shared_ptr<Context> context;
  Nic* nic = nullptr;
  Pd* pd = nullptr;
  Cq* send_cq = nullptr;
  Cq* recv_cq = nullptr;
  uint32_t qpn = 0;
  bool sig_all = false;
  ibv_qp_cap cap{};
  void* user_context = nullptr;

  std::atomic<uint64_t> sq_retired{0};
  std::atomic<uint64_t> rq_retired{0};
  std::atomic<bool> in_ready{false};

  std::mutex mu;
  // Guarded by mu.
  bool destroyed = false;
  ibv_qp_state state = IBV_QPS_RESET;
  uint8_t port = 1;
  uint16_t pkey_index = 0;
  unsigned access = 0;
  ibv_mtu path_mtu = IBV_MTU_1024;
  uint32_t dest_qpn = 0;
  uint32_t rq_psn = 0;
  uint32_t sq_psn = 0;
  uint8_t min_rnr_timer = 0;
  uint8_t timeout = 0;
  uint8_t retry_cnt = 0;
  uint8_t rnr_retry = 0;
  uint8_t max_rd_atomic = 0;
  uint8_t max_dest_rd_atomic = 0;
  bool ece_supported = false;  // SOFTVERBS_ECE was set when the QP was created
  uint32_t ece_options = 0;    // SOFTVERBS_ECE at creation, then what ibv_set_ece set
  ibv_ah_attr ah{};
  std::shared_ptr<Peer> peer;
  uint8_t peer_port = 0;
  bool unreachable = false;  // the RTR address named no live port
  bool broken = false;       // the connection to the peer broke
  bool fail_scheduled = false;

  std::deque<SendWr> sq;
  size_t send_next = 0;  // sq[send_next] is the next WR to transmit
  uint64_t sq_posted = 0;
  uint32_t next_psn = 0;
  Clock::time_point resume_at{};

  std::deque<RecvWr> rq;
  uint64_t rq_posted = 0;

  uint32_t expected_psn = 0;     // responder
  bool nak_outstanding = false;  // responder dropped the rest after a NAK
};

// Flushes every WR of qp with IBV_WC_WR_FLUSH_ERR and moves it to ERR
// (qp.mu held).
void enter_error(Qp& qp);
void push_send_cqe(Qp& qp, const SendWr& wr, ibv_wc_status status);
void push_recv_cqe(Qp& qp, const RecvWr& wr, ibv_wc_status status);

}  // namespace softverbs
