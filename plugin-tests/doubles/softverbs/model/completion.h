// Completion queues and the channels that announce them.
#pragma once

#include <infiniband/verbs.h>

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <random>

#include "handle.h"

namespace softverbs {

class Context;
class Cq;
class Qp;

struct Cqe {
  ibv_wc wc{};
  const Qp* qp = nullptr;  // CQEs of a destroyed or reset QP are purged
  // The slot counter of the queue the WR came from: polling the entry frees
  // its slot and every slot before it (RC), or that one slot (`unordered`).
  std::atomic<uint64_t>* retired = nullptr;
  uint64_t index = 0;  // position in the QP's send or receive queue
  // SRD: the entry may leave the CQ before older entries of its QP.
  bool unordered = false;
  bool unsolicited = false;  // a write with immediate that consumed no receive
  ibv_gid sgid{};            // SRD receive: the sender's GID
};

class Channel {
 public:
  Handle<ibv_comp_channel, Channel> handle{};
  std::mutex mu;
  std::deque<Cq*> events;
  std::atomic<int> users{0};
  ~Channel();
  void notify(Cq* cq);
};

// The verbs struct is an ibv_cq_ex, whose start is an ibv_cq: the same object
// serves ibv_create_cq (the ibv_cq part) and extended CQs (a personality
// fills the poll functions).
class Cq {
 public:
  Handle<ibv_cq_ex, Cq> handle{};
  Context* context = nullptr;
  Channel* channel = nullptr;
  int depth = 0;
  std::atomic<int> users{0};  // QPs
  bool counted = false;       // against max_cq (ibv_create_cq's)

  std::mutex mu;
  std::deque<Cqe> entries;
  bool armed = false;
  bool overflowed = false;
  int reorder_window = 0;
  std::mt19937_64 rng;
  // A personality's state for extended polling (EFA: efadv_cq).
  std::shared_ptr<void> ext;

  // Adds a completion (NIC thread or a poster); raises the channel event and
  // the CQ overflow event.
  void push(const Cqe& entry);
  // Removes the entries of a QP (destroy or reset).
  void purge(const Qp* qp);
  int poll(int max, ibv_wc* out);
  // The same, with everything the model knows about each entry.
  int poll(int max, Cqe* out);

  ibv_cq* verbs() { return reinterpret_cast<ibv_cq*>(&handle.verbs); }
};

inline Cq* cq_of(ibv_cq* cq) {
  return owner_of<Cq>(reinterpret_cast<ibv_cq_ex*>(cq));
}

}  // namespace softverbs
