// One rank of the lossy soak (soak.sh): run inside a network namespace
// with `ip netns exec`, while the script drops a share of the packets
// between the namespaces. The server receives, the client sends, both
// through the plugin, through one comm, for --messages messages.
//
// Both ranks draw the same sequence from --seed: groups of 1..8 receives
// (NCCL's grouped irecv), each with its own tag (half of them beyond the
// eager immediate's 20 bits), a size from 0 B to --max-size (zero, eager,
// medium and large, log-uniform within each class) and a posted size up to
// 4 KiB larger. Up to --window groups are in flight at once on each side.
// Every message's bytes are a function of (seed, index): the server checks
// every byte, the reported size and the guard zones around each buffer, so
// a lost, duplicated, shifted or misrouted message fails the run. The
// client times each send from its post to its completion and reports the
// percentiles per size class (the tail under loss).
//
//   weft-soak-rank --server|--client <addr> <port> [--messages N]
//                  [--seed S] [--max-size BYTES] [--window GROUPS]
// Exit: 0 passed, 1 failed (message on stderr), 2 usage.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "channel.h"
#include "net_ops.h"
#include "pattern.h"

using namespace weft;
using namespace weft::ft;

namespace {

constexpr int kMaxGroup = 8;
constexpr size_t kMaxSlack = 4096;

struct Options {
  bool server = false;
  std::string addr;
  int port = 0;
  uint64_t messages = 10000;
  uint64_t seed = 1;
  size_t max_size = 16u << 20;
  int window = 2;
};

struct Message {
  uint64_t index = 0;
  int tag = 0;
  size_t size = 0;
  size_t posted = 0;
};

enum SizeClass { kZero, kEager, kMedium, kLarge, kClasses };
const char* const kClassNames[kClasses] = {"0 B", "1 B-8 KiB", "8 KiB-1 MiB", "1 MiB-max"};

SizeClass class_of(size_t size) {
  if (size == 0) return kZero;
  if (size <= 8192) return kEager;
  if (size <= (1u << 20)) return kMedium;
  return kLarge;
}

// The groups both ranks draw, one after the other.
class Plan {
 public:
  Plan(uint64_t seed, size_t max_size, uint64_t messages)
      : rng_(seed), max_size_(max_size), left_(messages) {}

  bool next(std::vector<Message>* group) {
    group->clear();
    if (left_ == 0) return false;
    const int n = static_cast<int>(std::min<uint64_t>(1 + rng_() % kMaxGroup, left_));
    const int base = static_cast<int>(rng_() % 2 == 0 ? rng_() % 60000 : 600000 + rng_() % 60000);
    for (int k = 0; k < n; ++k) {
      Message m;
      m.index = index_++;
      m.tag = base * kMaxGroup + k;  // distinct within the group
      m.size = draw_size();
      m.posted = m.size + (rng_() % 2 == 0 ? 0 : rng_() % kMaxSlack);
      group->push_back(m);
    }
    left_ -= static_cast<uint64_t>(n);
    return true;
  }

 private:
  size_t log_uniform(size_t lo, size_t hi) {
    std::uniform_real_distribution<double> u(std::log(double(lo)), std::log(double(hi)));
    return std::clamp<size_t>(static_cast<size_t>(std::exp(u(rng_))), lo, hi);
  }
  size_t draw_size() {
    const uint64_t r = rng_() % 100;
    if (r < 10) return 0;
    if (r < 50) return 1 + rng_() % 8192;
    if (r < 80 || max_size_ <= (1u << 20))
      return log_uniform(8193, std::min<size_t>(1u << 20, max_size_));
    return log_uniform((1u << 20) + 1, max_size_);
  }

  std::mt19937_64 rng_;
  size_t max_size_;
  uint64_t left_;
  uint64_t index_ = 0;
};

// A group's buffers, registered once and reused.
struct Slot {
  std::vector<std::unique_ptr<Buffer>> buffers;
  std::vector<std::unique_ptr<Mr>> mrs;
  std::vector<Message> group;
  void* request = nullptr;   // server: the grouped receive
  std::vector<void*> sends;  // client: one per message
  std::vector<std::chrono::steady_clock::time_point> posted_at;
  std::vector<bool> done;
};

void make_slots(NetClient& c, void* comm, const Options& o, std::vector<Slot>* slots) {
  slots->resize(static_cast<size_t>(o.window));
  for (Slot& slot : *slots) {
    for (int k = 0; k < kMaxGroup; ++k) {
      slot.buffers.push_back(std::make_unique<Buffer>(o.max_size + kMaxSlack));
      slot.mrs.push_back(
          std::make_unique<Mr>(c, comm, slot.buffers.back()->data(), o.max_size + kMaxSlack));
    }
  }
}

std::string what_of(const Message& m) {
  return "message #" + std::to_string(m.index) + " (tag " + std::to_string(m.tag) + ", " +
         std::to_string(m.size) + " bytes into " + std::to_string(m.posted) + ")";
}

struct Totals {
  uint64_t messages = 0;
  uint64_t bytes = 0;
};

void report_progress(const char* role, const Totals& t, const Options& o,
                     std::chrono::steady_clock::time_point start, uint64_t* next_report) {
  if (t.messages < *next_report) return;
  *next_report += std::max<uint64_t>(o.messages / 10, 1);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::fprintf(stderr, "soak %s: %llu/%llu messages, %.1f GiB, %.0f s\n", role,
               static_cast<unsigned long long>(t.messages),
               static_cast<unsigned long long>(o.messages), t.bytes / double(1ull << 30), s);
}

void run_server(Channel& ch, NetClient& c, int dev, const Options& o) {
  void* rc = recv_side_connect(c, dev, ch);
  std::vector<Slot> slots;
  make_slots(c, rc, o, &slots);
  Plan plan(o.seed, o.max_size, o.messages);
  Totals totals;
  const auto start = std::chrono::steady_clock::now();
  uint64_t next_report = 0;
  bool more = true;
  size_t busy = 0;
  while (more || busy > 0) {
    for (Slot& slot : slots) {
      if (slot.request != nullptr) {
        int sizes[kMaxGroup] = {};
        ncclResult_t res = ncclSuccess;
        if (!poll_once(c, slot.request, &res, sizes)) continue;
        FT_REQUIRE(res == ncclSuccess, "the receive of "
                                           << what_of(slot.group[0])
                                           << "'s group failed: " << result_name(res));
        for (size_t k = 0; k < slot.group.size(); ++k) {
          const Message& m = slot.group[k];
          check_received(*slot.buffers[k], sizes[k], m.size, m.posted,
                         pattern_seed(o.seed, m.index), what_of(m));
          ++totals.messages;
          totals.bytes += m.size;
        }
        slot.request = nullptr;
        --busy;
        report_progress("server", totals, o, start, &next_report);
      }
      if (slot.request == nullptr && more) {
        more = plan.next(&slot.group);
        if (!more) continue;
        const int n = static_cast<int>(slot.group.size());
        void* data[kMaxGroup];
        size_t sizes[kMaxGroup];
        int tags[kMaxGroup];
        void* mhs[kMaxGroup];
        for (int k = 0; k < n; ++k) {
          fill_byte(slot.buffers[k]->data(), slot.group[k].posted, Buffer::kPoison);
          data[k] = slot.buffers[k]->data();
          sizes[k] = slot.group[k].posted;
          tags[k] = slot.group[k].tag;
          mhs[k] = slot.mrs[k]->get();
        }
        slot.request = post_irecv(c, rc, n, data, sizes, tags, mhs);
        ++busy;
      }
    }
    FT_DEADLINE("the soak's receives");
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::fprintf(stderr,
               "soak server: %llu messages, %.2f GiB in %.1f s (%.2f GB/s), every byte, size and "
               "guard zone checked\n",
               static_cast<unsigned long long>(totals.messages), totals.bytes / double(1ull << 30),
               s, totals.bytes / s / 1e9);
  ch.sync("done");
  slots.clear();
  FT_OK(c.close_recv(rc));
}

void print_latencies(std::vector<double> (&us)[kClasses]) {
  for (int k = 0; k < kClasses; ++k) {
    std::vector<double>& v = us[k];
    if (v.empty()) continue;
    std::sort(v.begin(), v.end());
    auto at = [&](double q) { return v[std::min(v.size() - 1, size_t(q * double(v.size())))]; };
    std::fprintf(stderr,
                 "soak client: send post to completion, %-12s n=%-8zu p50 %9.1f us  p99 %9.1f us  "
                 "p99.9 %9.1f us  max %9.1f us\n",
                 kClassNames[k], v.size(), at(0.5), at(0.99), at(0.999), v.back());
  }
}

void run_client(Channel& ch, NetClient& c, int dev, const Options& o) {
  void* sc = send_side_connect(c, dev, ch);
  std::vector<Slot> slots;
  make_slots(c, sc, o, &slots);
  Plan plan(o.seed, o.max_size, o.messages);
  std::vector<double> us[kClasses];
  std::mt19937_64 order(o.seed ^ 0x5eed);
  Totals totals;
  const auto start = std::chrono::steady_clock::now();
  uint64_t next_report = 0;
  bool more = true;
  size_t busy = 0;
  // Groups go out in the plan's order (the receiver's groups take messages
  // in order); within a group, in a shuffled order.
  size_t current = 0;  // the slot whose group is being sent
  while (more || busy > 0) {
    for (Slot& slot : slots) {
      for (size_t k = 0; k < slot.sends.size(); ++k) {
        if (slot.done[k] || slot.sends[k] == nullptr) continue;
        ncclResult_t res = ncclSuccess;
        if (!poll_once(c, slot.sends[k], &res, nullptr)) continue;
        FT_REQUIRE(res == ncclSuccess,
                   "the send of " << what_of(slot.group[k]) << " failed: " << result_name(res));
        slot.done[k] = true;
        const Message& m = slot.group[k];
        us[class_of(m.size)].push_back(std::chrono::duration<double, std::micro>(
                                           std::chrono::steady_clock::now() - slot.posted_at[k])
                                           .count());
        ++totals.messages;
        totals.bytes += m.size;
        if (std::all_of(slot.done.begin(), slot.done.end(), [](bool d) { return d; })) {
          slot.sends.clear();
          --busy;
        }
        report_progress("client", totals, o, start, &next_report);
      }
    }
    Slot& slot = slots[current];
    if (slot.sends.empty() && more) {
      more = plan.next(&slot.group);
      if (more) {
        const size_t n = slot.group.size();
        std::vector<size_t> perm(n);
        for (size_t k = 0; k < n; ++k) perm[k] = k;
        std::shuffle(perm.begin(), perm.end(), order);
        slot.sends.assign(n, nullptr);
        slot.done.assign(n, false);
        slot.posted_at.assign(n, {});
        for (size_t k : perm) {
          const Message& m = slot.group[k];
          fill_pattern(slot.buffers[k]->data(), m.size, pattern_seed(o.seed, m.index));
          slot.posted_at[k] = std::chrono::steady_clock::now();
          slot.sends[k] =
              post_isend(c, sc, slot.buffers[k]->data(), m.size, m.tag, slot.mrs[k]->get());
        }
        ++busy;
        current = (current + 1) % slots.size();
      }
    }
    FT_DEADLINE("the soak's sends");
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::fprintf(stderr, "soak client: %llu messages, %.2f GiB in %.1f s\n",
               static_cast<unsigned long long>(totals.messages), totals.bytes / double(1ull << 30),
               s);
  print_latencies(us);
  ch.sync("done");
  slots.clear();
  FT_OK(c.close_send(sc));
}

bool parse(int argc, char** argv, Options* o) {
  if (argc < 4) return false;
  if (std::strcmp(argv[1], "--server") != 0 && std::strcmp(argv[1], "--client") != 0) return false;
  o->server = std::strcmp(argv[1], "--server") == 0;
  o->addr = argv[2];
  o->port = std::atoi(argv[3]);
  for (int i = 4; i + 1 < argc; i += 2) {
    const std::string key = argv[i];
    const unsigned long long value = std::strtoull(argv[i + 1], nullptr, 0);
    if (key == "--messages") {
      o->messages = value;
    } else if (key == "--seed") {
      o->seed = value;
    } else if (key == "--max-size") {
      o->max_size = value;
    } else if (key == "--window") {
      o->window = static_cast<int>(value);
    } else {
      return false;
    }
  }
  return (argc - 4) % 2 == 0 && o->port > 0 && o->messages > 0 && o->max_size > 8192 &&
         o->window >= 1 && o->window <= 32;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  if (!parse(argc, argv, &o)) {
    std::fprintf(stderr,
                 "usage: %s --server|--client <addr> <port> [--messages N] [--seed S] "
                 "[--max-size BYTES (> 8192)] [--window GROUPS (1..32)]\n",
                 argv[0]);
    return 2;
  }
  set_rank_label(o.server ? "soak server" : "soak client");
  start_deadline();
  try {
    Channel ch(tcp_rank_socket(o.server, o.addr, o.port));
    auto c = open_plugin(12);
    const int dev = test_device(*c);
    if (o.server) {
      run_server(ch, *c, dev, o);
    } else {
      run_client(ch, *c, dev, o);
    }
    FT_OK(c->finalize());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "FAILED: %s\n", e.what());
    return 1;
  }
  std::fprintf(stderr, "%s: passed\n", o.server ? "soak server" : "soak client");
  return 0;
}
