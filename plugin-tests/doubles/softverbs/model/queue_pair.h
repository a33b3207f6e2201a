// Queue pairs (RC, and SRD for the EFA personality): their attributes, their
// send and receive queues, and the completions their work requests end with.
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

// Where an SRD WR goes: set per WR (wr_set_ud_addr), resolved by the NIC.
struct SrdDest {
  std::shared_ptr<Peer> peer;  // null: the address names nothing alive
  uint32_t qpn = 0;
  uint32_t qkey = 0;
  uint8_t port = 0;  // the target's port
  ibv_gid gid{};     // the AH's GID, to resolve the address again
};

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
  // SRD only.
  SrdDest dest;
  uint32_t preset_vendor = 0;      // EFA status of `preset`
  bool sent = false;               // transmitted, awaiting the target's answer
  Clock::time_point not_before{};  // RNR back-off
};

struct RecvWr {
  uint64_t wr_id = 0;
  uint64_t index = 0;
  uint64_t capacity = 0;
  std::vector<Piece> pieces;
  ibv_wc_status preset = IBV_WC_SUCCESS;
};

enum class QpType { kRc, kSrd };

class Qp : public std::enable_shared_from_this<Qp> {
 public:
  Handle<ibv_qp, Qp> handle{};
  QpType type = QpType::kRc;
  // SRD: writes with immediate complete without consuming a receive.
  bool unsolicited_write_recv = false;
  // The personality's extended QP (an ibv_qp_ex first) when it made one.
  std::shared_ptr<void> ex;
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
  uint32_t qkey = 0;           // SRD
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

// Makes a QP on `pd` (registers its number, counts its users, adds it to the
// NIC); nullptr with errno set on failure. The caller checks the attributes.
std::shared_ptr<Qp> make_qp(Pd* pd, Cq* send_cq, Cq* recv_cq, const ibv_qp_cap& cap, bool sig_all,
                            void* qp_context, QpType type);

// Flushes every WR of qp with IBV_WC_WR_FLUSH_ERR and moves it to ERR
// (qp.mu held).
void enter_error(Qp& qp);
void push_send_cqe(Qp& qp, const SendWr& wr, ibv_wc_status status);
// A send WR the personality built: counts it, numbers it, and queues it, or
// completes it flushed when the QP is in ERR (qp.mu held). True when queued:
// the caller kicks the NIC once its lock is released.
bool enqueue_send(Qp& qp, SendWr wr);
// Counts the bytes a completed send WR moved (written, read or sent).
void count_completed_bytes(const SendWr& wr);
void push_recv_cqe(Qp& qp, const RecvWr& wr, ibv_wc_status status);
// SRD: a send WR's completion with an EFA status (vendor error) beside the
// verbs status; unordered.
void push_srd_send_cqe(Qp& qp, const SendWr& wr, ibv_wc_status status, uint32_t vendor_err);

}  // namespace softverbs
