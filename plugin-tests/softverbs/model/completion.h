// Completion queues and the channels that announce them.
#pragma once

#include <infiniband/verbs.h>

#include <atomic>
#include <cstdint>
#include <deque>
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
  // its slot and every slot before it.
  std::atomic<uint64_t>* retired = nullptr;
  uint64_t index = 0;  // position in the QP's send or receive queue
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

class Cq {
 public:
  Handle<ibv_cq, Cq> handle{};
  Context* context = nullptr;
  Channel* channel = nullptr;
  int depth = 0;
  std::atomic<int> users{0};  // QPs

  std::mutex mu;
  std::deque<Cqe> entries;
  bool armed = false;
  bool overflowed = false;
  int reorder_window = 0;
  std::mt19937_64 rng;

  // Adds a completion (NIC thread or a poster); raises the channel event and
  // the CQ overflow event.
  void push(const Cqe& entry);
  // Removes the entries of a QP (destroy or reset).
  void purge(const Qp* qp);
  int poll(int max, ibv_wc* out);
};

}  // namespace softverbs
