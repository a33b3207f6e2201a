#include "job_run.h"

#include <dirent.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "backend.h"
#include "data_check.h"
#include "errors.h"
#include "host_buffer.h"
#include "job_bootstrap.h"
#include "job_graph.h"
#include "options.h"
#include "weft_client/net_client.h"

namespace weft::perf {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

// Resident and peak resident memory (KiB), from /proc/self/status.
struct Memory {
  long rss_kib = 0;
  long hwm_kib = 0;
};
Memory memory_now() {
  Memory m;
  std::ifstream status("/proc/self/status");
  std::string key;
  while (status >> key) {
    if (key == "VmRSS:") status >> m.rss_kib;
    if (key == "VmHWM:") status >> m.hwm_kib;
  }
  return m;
}
// The peak starts again from the current resident size (Linux 4.0+), so
// that a high-water mark measures this phase and not the loading before it.
void reset_peak() {
  std::ofstream("/proc/self/clear_refs") << "5";
}
int open_fds() {
  int n = 0;
  if (DIR* dir = opendir("/proc/self/fd")) {
    while (dirent* e = readdir(dir))
      if (e->d_name[0] != '.') ++n;
    closedir(dir);
  }
  return n - 1;  // the directory's own
}

// What every rank reports to rank 0 per pattern (plain bytes over the bootstrap).
struct RankReport {
  int32_t rank = 0;
  int32_t sends = 0, recvs = 0;
  int32_t peers = 0;     // ranks this one has comms with
  double listen_s = 0;   // every listen and the handle exchange
  double connect_s = 0;  // first connect to the last comm ready
  long base_kib = 0;     // resident before the first listen (device open)
  long setup_hwm_kib = 0, data_hwm_kib = 0;
  long buffer_kib = 0;  // the tool's own message buffers (left out of the per-comm figure)
  int32_t base_fds = 0, max_fds = 0, after_fds = 0;
  double data_s = 0;
  uint64_t bytes_sent = 0;
  uint64_t checked = 0;  // messages whose every byte was compared
};

std::string where(int peer, int lane) {
  return "rank " + std::to_string(peer) + " lane " + std::to_string(lane);
}

class JobRank {
 public:
  JobRank(const Options& opts, JobBootstrap& boot) : opts_(opts), boot_(boot) {
    client_ = open_plugin_device(opts);
    // A listen opens the device (libfabric's endpoint, its provider pools)
    // before the baseline: the figures are then what the comms cost.
    char handle[NCCL_NET_HANDLE_MAXSIZE] = {};
    check("listen", client_->listen(opts.dev, handle, &opener_));
  }
  ~JobRank() {
    close_all();
    if (opener_) client_->close_listen(opener_);
    client_->finalize();
  }

  RankReport run(JobPattern pattern) {
    RankReport report;
    report.rank = boot_.rank();
    comms_ = job_comms(pattern, boot_.rank(), boot_.ranks(), opts_.channels);
    report.sends = static_cast<int32_t>(comms_.sends.size());
    report.recvs = static_cast<int32_t>(comms_.recvs.size());
    std::set<int> peers;
    for (const JobLink& l : comms_.sends) peers.insert(l.peer);
    for (const JobLink& l : comms_.recvs) peers.insert(l.peer);
    report.peers = static_cast<int32_t>(peers.size());
    boot_.barrier();
    const Memory base = memory_now();
    reset_peak();
    report.base_kib = base.rss_kib;
    report.base_fds = report.max_fds = open_fds();
    const auto t0 = Clock::now();
    std::vector<Bytes> handles = listen_all();
    if (boot_.rank() == opts_.job_kill_rank) {
      // A rank that crashes during setup, its listens open and unaccepted.
      std::fprintf(stderr, "weft-perf (rank %d): killing itself (--kill-rank)\n", boot_.rank());
      std::fflush(stderr);
      ::raise(SIGKILL);
    }
    const auto t1 = Clock::now();
    // A rank whose setup failed stays (its comms open) until every rank
    // is done or gone: leaving at once would fail its peers' connects to
    // it, and their errors would name it instead of the rank that died.
    std::string failure;
    try {
      connect_all(handles, &report);
    } catch (const PerfError& e) {
      failure = e.what();
    }
    const auto t2 = Clock::now();
    const std::vector<int> gone = boot_.settle();
    if (!failure.empty()) throw PerfError(failure);
    if (!gone.empty()) {
      std::string list;
      for (int r : gone) list += (list.empty() ? "" : ", ") + std::to_string(r);
      throw PerfError("rank" + std::string(gone.size() > 1 ? "s " : " ") + list +
                      " left the job during setup");
    }
    report.listen_s = seconds_between(t0, t1);
    report.connect_s = seconds_between(t1, t2);
    report.setup_hwm_kib = memory_now().hwm_kib;
    report.after_fds = open_fds();
    report.max_fds = std::max(report.max_fds, report.after_fds);
    move_bytes(&report);
    report.data_hwm_kib = memory_now().hwm_kib;
    boot_.barrier();
    close_all();
    return report;
  }

 private:
  void check(const char* call, ncclResult_t r) const {
    if (r != ncclSuccess)
      throw PerfError(std::string("plugin: ") + call + " returned " + nccl_result_name(r));
  }
  void check_on(const char* call, ncclResult_t r, const JobLink& link) const {
    if (r != ncclSuccess) {
      throw PerfError(std::string(call) + " with " + where(link.peer, link.lane) + " returned " +
                      nccl_result_name(r) + " (the plugin's log says why)");
    }
  }

  // Listens for every receive comm; each sender gets the handles of its
  // links to this rank, lane by lane, through rank 0.
  std::vector<Bytes> listen_all() {
    listens_.assign(comms_.recvs.size(), nullptr);
    std::vector<Bytes> to_rank(static_cast<size_t>(boot_.ranks()));
    for (size_t k = 0; k < comms_.recvs.size(); ++k) {
      const JobLink& link = comms_.recvs[k];
      char handle[NCCL_NET_HANDLE_MAXSIZE] = {};
      check_on("listen", client_->listen(opts_.dev, handle, &listens_[k]), link);
      const uint32_t lane = static_cast<uint32_t>(link.lane);
      Bytes& out = to_rank[static_cast<size_t>(link.peer)];
      out.insert(out.end(), reinterpret_cast<const uint8_t*>(&lane),
                 reinterpret_cast<const uint8_t*>(&lane) + sizeof(lane));
      out.insert(out.end(), handle, handle + sizeof(handle));
    }
    return boot_.exchange(to_rank);
  }

  // Connects and accepts polled together, as NCCL's proxy does; no call
  // waits for another.
  void connect_all(const std::vector<Bytes>& from_rank, RankReport* report) {
    constexpr size_t kRecord = sizeof(uint32_t) + NCCL_NET_HANDLE_MAXSIZE;
    std::map<std::pair<int, int>, const uint8_t*> handle_of;  // (peer, lane)
    for (size_t peer = 0; peer < from_rank.size(); ++peer) {
      const Bytes& in = from_rank[peer];
      if (in.size() % kRecord != 0) throw PerfError("bootstrap: malformed handles");
      for (size_t at = 0; at < in.size(); at += kRecord) {
        uint32_t lane = 0;
        std::memcpy(&lane, in.data() + at, sizeof(lane));
        handle_of[{static_cast<int>(peer), static_cast<int>(lane)}] = in.data() + at + sizeof(lane);
      }
    }
    // NCCL's connect may rewrite its copy of the handle (weft parks a
    // connect's state under a cookie in it): one copy per send comm.
    std::vector<std::array<uint8_t, NCCL_NET_HANDLE_MAXSIZE>> handles(comms_.sends.size());
    for (size_t k = 0; k < comms_.sends.size(); ++k) {
      const JobLink& link = comms_.sends[k];
      auto found = handle_of.find({link.peer, link.lane});
      if (found == handle_of.end())
        throw PerfError("no handle from " + where(link.peer, link.lane));
      std::memcpy(handles[k].data(), found->second, NCCL_NET_HANDLE_MAXSIZE);
    }
    sends_.assign(comms_.sends.size(), nullptr);
    recvs_.assign(comms_.recvs.size(), nullptr);
    size_t left = sends_.size() + recvs_.size();
    std::map<int, std::string> failed;  // peer rank -> the first failure with it
    auto last_progress = Clock::now();
    auto next_fd_sample = Clock::now();
    while (left > 0) {
      const size_t before = left;
      for (size_t k = 0; k < sends_.size(); ++k) {
        if (sends_[k] || failed.count(comms_.sends[k].peer)) continue;
        const ncclResult_t r = client_->connect(opts_.dev, handles[k].data(), &sends_[k]);
        if (r != ncclSuccess) {
          // That rank is gone (or refuses us): the rest of the job still
          // connects, so that every rank's error names the rank that
          // failed rather than the first rank that gave up.
          failed[comms_.sends[k].peer] = std::string("connect with ") +
                                         where(comms_.sends[k].peer, comms_.sends[k].lane) +
                                         " returned " + nccl_result_name(r);
          last_progress = Clock::now();
          continue;
        }
        if (sends_[k]) --left;
      }
      for (size_t k = 0; k < recvs_.size(); ++k) {
        if (recvs_[k] || failed.count(comms_.recvs[k].peer)) continue;
        check_on("accept", client_->accept(listens_[k], &recvs_[k]), comms_.recvs[k]);
        if (recvs_[k]) {
          check_on("closeListen", client_->close_listen(listens_[k]), comms_.recvs[k]);
          listens_[k] = nullptr;
          --left;
        }
      }
      if (!failed.empty() && left == unresolved_with(failed)) break;
      const auto now = Clock::now();
      if (now >= next_fd_sample) {
        report->max_fds = std::max(report->max_fds, open_fds());
        next_fd_sample = now + std::chrono::milliseconds(10);
      }
      if (left != before) last_progress = now;
      if (now - last_progress > std::chrono::seconds(opts_.timeout_s))
        throw PerfError(pending_text(left) + failed_text(failed));
    }
    if (!failed.empty()) throw PerfError(failed_text(failed).substr(2));
  }

  // Comms not connected whose peer is one of `failed`.
  size_t unresolved_with(const std::map<int, std::string>& failed) const {
    size_t n = 0;
    for (size_t k = 0; k < sends_.size(); ++k)
      n += !sends_[k] && failed.count(comms_.sends[k].peer) ? 1 : 0;
    for (size_t k = 0; k < recvs_.size(); ++k)
      n += !recvs_[k] && failed.count(comms_.recvs[k].peer) ? 1 : 0;
    return n;
  }

  static std::string failed_text(const std::map<int, std::string>& failed) {
    std::string text;
    for (const auto& [peer, what] : failed)
      text += "; " + what + " (the plugin's log says why; its other comms not waited for)";
    return text;
  }

  // Which comms are not connected, by peer rank: what a stalled setup names.
  std::string pending_text(size_t left) const {
    std::map<int, std::pair<int, int>> by_peer;  // peer -> (sends, recvs) pending
    for (size_t k = 0; k < sends_.size(); ++k)
      if (!sends_[k]) ++by_peer[comms_.sends[k].peer].first;
    for (size_t k = 0; k < recvs_.size(); ++k)
      if (!recvs_[k]) ++by_peer[comms_.recvs[k].peer].second;
    std::string text = std::to_string(left) + " comms not connected after " +
                       std::to_string(opts_.timeout_s) + " s without progress (see --timeout):";
    int shown = 0;
    for (const auto& [peer, counts] : by_peer) {
      if (++shown > 8) {
        text += " ...";
        break;
      }
      text += " rank " + std::to_string(peer) + " (" + std::to_string(counts.first) +
              " connects, " + std::to_string(counts.second) + " accepts)";
    }
    return text;
  }

  // Seeds: what sender `from` writes on its link to `to`, lane `lane`.
  static uint64_t key_of(int from, int to, int lane) {
    return pattern_key(from, static_cast<size_t>(to) << 20 | static_cast<size_t>(lane), 0);
  }

  // iters messages on every comm, two in flight per comm each way; the
  // first and the last message of every receive comm compared byte by byte.
  void move_bytes(RankReport* report) {
    const size_t size = opts_.job_bytes;
    const int iters = opts_.job_iters;
    send_sides_ = std::vector<Side>(sends_.size());
    recv_sides_ = std::vector<Side>(recvs_.size());
    std::vector<Side>& sends = send_sides_;
    std::vector<Side>& recvs = recv_sides_;
    for (size_t k = 0; k < sends.size(); ++k) {
      const JobLink& link = comms_.sends[k];
      sends[k].buffer = HostBuffer(std::max<size_t>(size, 1));
      fill_pattern(sends[k].buffer.data(), size, key_of(boot_.rank(), link.peer, link.lane));
      check_on("regMr",
               client_->reg_mr(sends_[k], sends[k].buffer.data(), sends[k].buffer.size(),
                               NCCL_PTR_HOST, &sends[k].mhandle),
               link);
    }
    for (size_t k = 0; k < recvs.size(); ++k) {
      recvs[k].buffer = HostBuffer(std::max<size_t>(size, 1) * kSlots);
      poison(recvs[k].buffer.data(), recvs[k].buffer.size());
      check_on("regMr",
               client_->reg_mr(recvs_[k], recvs[k].buffer.data(), recvs[k].buffer.size(),
                               NCCL_PTR_HOST, &recvs[k].mhandle),
               comms_.recvs[k]);
    }
    report->buffer_kib = static_cast<long>((sends.size() + recvs.size() * kSlots) * size / 1024);
    const auto t0 = Clock::now();
    auto last_progress = t0;
    size_t left = (sends.size() + recvs.size()) * static_cast<size_t>(iters);
    auto slot_data = [&](Side& side, int slot) {
      return side.buffer.data() + static_cast<size_t>(slot) * std::max<size_t>(size, 1);
    };
    while (left > 0) {
      const size_t before = left;
      for (size_t k = 0; k < sends.size(); ++k) {
        Side& s = sends[k];
        const JobLink& link = comms_.sends[k];
        for (void*& req : s.request) {
          if (!req) continue;
          int done = 0, got = 0;
          check_on("test (send)", client_->test(req, &done, &got), link);
          if (!done) continue;
          req = nullptr;
          --left;
          report->bytes_sent += size;
        }
        const int slot = s.posted % kSlots;
        if (s.posted < iters && !s.request[slot]) {
          check_on(
              "isend",
              client_->isend(sends_[k], s.buffer.data(), size, slot, s.mhandle, &s.request[slot]),
              link);
          if (s.request[slot]) ++s.posted;
        }
      }
      for (size_t k = 0; k < recvs.size(); ++k) {
        Side& r = recvs[k];
        const JobLink& link = comms_.recvs[k];
        for (int slot = 0; slot < kSlots; ++slot) {
          void*& req = r.request[slot];
          if (!req) continue;
          int done = 0, got = 0;
          check_on("test (receive)", client_->test(req, &done, &got), link);
          if (!done) continue;
          req = nullptr;
          --left;
          if (static_cast<size_t>(got) != size) {
            throw DataMismatch("receive from " + where(link.peer, link.lane) + ": " +
                               std::to_string(got) + " bytes, " + std::to_string(size) + " sent");
          }
          const int message = r.message[slot];
          if (message < kSlots || message >= iters - kSlots) {
            char* data = slot_data(r, slot);
            const size_t bad =
                find_mismatch(data, size, key_of(link.peer, boot_.rank(), link.lane));
            if (bad != SIZE_MAX) {
              throw DataMismatch("receive " + std::to_string(message) + " from " +
                                 where(link.peer, link.lane) + ": byte " + std::to_string(bad) +
                                 " differs");
            }
            ++report->checked;
            poison(data, size);
          }
        }
        const int slot = r.posted % kSlots;
        if (r.posted < iters && !r.request[slot]) {
          void* buffers[1] = {slot_data(r, slot)};
          size_t sizes[1] = {size};
          int tags[1] = {slot};
          void* mhandles[1] = {r.mhandle};
          check_on("irecv",
                   client_->irecv(recvs_[k], 1, buffers, sizes, tags, mhandles, &r.request[slot]),
                   link);
          if (r.request[slot]) r.message[slot] = r.posted++;
        }
      }
      const auto now = Clock::now();
      if (left != before) last_progress = now;
      if (now - last_progress > std::chrono::seconds(opts_.timeout_s)) {
        throw PerfError(std::to_string(left) + " messages not done after " +
                        std::to_string(opts_.timeout_s) + " s without progress (see --timeout)");
      }
    }
    report->data_s = seconds_between(t0, Clock::now());
  }

  void close_all() {
    auto deregister = [&](std::vector<Side>& sides, std::vector<void*>& comms) {
      for (size_t k = 0; k < sides.size() && k < comms.size(); ++k)
        if (sides[k].mhandle && comms[k]) client_->dereg_mr(comms[k], sides[k].mhandle);
    };
    deregister(send_sides_, sends_);
    deregister(recv_sides_, recvs_);
    for (void*& c : sends_)
      if (c) client_->close_send(std::exchange(c, nullptr));
    for (void*& c : recvs_)
      if (c) client_->close_recv(std::exchange(c, nullptr));
    for (void*& c : listens_)
      if (c) client_->close_listen(std::exchange(c, nullptr));
    send_sides_.clear();
    recv_sides_.clear();
  }

  const Options& opts_;
  JobBootstrap& boot_;
  std::unique_ptr<NetClient> client_;
  void* opener_ = nullptr;
  RankComms comms_;
  std::vector<void*> listens_, sends_, recvs_;
  // Message m of a comm goes in slot m % 2 with tag m % 2, on both sides.
  static constexpr int kSlots = 2;
  struct Side {
    HostBuffer buffer;  // send: one message; receive: kSlots
    void* mhandle = nullptr;
    void* request[kSlots] = {};
    int message[kSlots] = {};  // the message a slot's request carries
    int posted = 0;
  };
  // Members, freed only after close_all(): a run that fails mid-transfer
  // closes its comms, requests in flight, before their buffers go.
  std::vector<Side> send_sides_, recv_sides_;
};

double median_of(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

// Prints the pattern's figures; false when a rank passed a bound it was given.
bool print_report(const Options& opts, JobPattern pattern, const std::vector<RankReport>& all) {
  std::vector<double> rates, setup_kib, data_kib, fds, fds_per_peer, bandwidth;
  double setup_s = 0, listen_s = 0;
  long comms = 0;
  uint64_t checked = 0;
  for (const RankReport& r : all) {
    const int n = std::max(1, r.sends + r.recvs);
    comms += r.sends;
    checked += r.checked;
    setup_s = std::max(setup_s, r.listen_s + r.connect_s);
    listen_s = std::max(listen_s, r.listen_s);
    rates.push_back(n / std::max(r.connect_s, 1e-9));
    setup_kib.push_back(static_cast<double>(r.setup_hwm_kib - r.base_kib) / n);
    data_kib.push_back(static_cast<double>(r.data_hwm_kib - r.base_kib - r.buffer_kib) / n);
    fds.push_back(static_cast<double>(r.max_fds - r.base_fds) / n);
    fds_per_peer.push_back(static_cast<double>(r.max_fds - r.base_fds) / std::max(1, r.peers));
    bandwidth.push_back(r.data_s > 0 ? static_cast<double>(r.bytes_sent) / r.data_s / 1e9 : 0);
  }
  const auto [min_rate, max_rate] = std::minmax_element(rates.begin(), rates.end());
  const RankReport& first = all.front();
  std::printf(
      "# weft-perf job %s: %d ranks, %d channel%s, %ld comm pairs; rank 0 has %d send "
      "and %d receive comms\n",
      job_pattern_name(pattern), opts.ranks, opts.channels, opts.channels == 1 ? "" : "s", comms,
      first.sends, first.recvs);
  std::printf("setup: %.3f s (listens and handle exchange %.3f s), slowest rank\n", setup_s,
              listen_s);
  std::printf("connects/s per process: median %.0f, min %.0f, max %.0f\n", median_of(rates),
              *min_rate, *max_rate);
  std::printf(
      "per comm, high-water mark over the baseline: %.1f KiB at setup (max %.1f), %.1f KiB with "
      "traffic (max %.1f, the tool's buffers left out); %.3f fds (max %.3f), %.2f per peer rank "
      "(max %.2f)\n",
      median_of(setup_kib), *std::max_element(setup_kib.begin(), setup_kib.end()),
      median_of(data_kib), *std::max_element(data_kib.begin(), data_kib.end()), median_of(fds),
      *std::max_element(fds.begin(), fds.end()), median_of(fds_per_peer),
      *std::max_element(fds_per_peer.begin(), fds_per_peer.end()));
  std::printf("bandwidth per rank (sent, %s messages x %d per comm): median %.3f GB/s, min %.3f\n",
              readable_size(opts.job_bytes).c_str(), opts.job_iters, median_of(bandwidth),
              *std::min_element(bandwidth.begin(), bandwidth.end()));
  std::printf("checked: %llu messages compared byte by byte, every comm\n",
              static_cast<unsigned long long>(checked));
  bool within = true;
  for (size_t i = 0; i < all.size(); ++i) {
    const double kib = std::max(setup_kib[i], data_kib[i]);
    if (opts.job_max_kib_per_comm > 0 && kib > opts.job_max_kib_per_comm) {
      std::printf("FAIL: rank %d holds %.1f KiB per comm at its high-water mark (at most %.1f)\n",
                  all[i].rank, kib, opts.job_max_kib_per_comm);
      within = false;
    }
    if (opts.job_max_fds_per_peer > 0 && fds_per_peer[i] > opts.job_max_fds_per_peer) {
      std::printf(
          "FAIL: rank %d holds %.2f fds per peer rank at its high-water mark (at most "
          "%.2f)\n",
          all[i].rank, fds_per_peer[i], opts.job_max_fds_per_peer);
      within = false;
    }
  }
  std::fflush(stdout);
  return within;
}

Bytes pack(const RankReport& r) {
  Bytes out(sizeof(r));
  std::memcpy(out.data(), &r, sizeof(r));
  return out;
}

int run_rank_of_job(const Options& opts, JobBootstrap& boot) {
  JobRank rank(opts, boot);
  bool within = true;
  for (JobPattern pattern : opts.jobs) {
    const RankReport mine = rank.run(pattern);
    std::vector<Bytes> all = boot.gather(pack(mine));
    if (boot.rank() != 0) continue;
    std::vector<RankReport> reports;
    for (const Bytes& b : all) {
      if (b.size() != sizeof(RankReport)) throw PerfError("bootstrap: malformed rank report");
      RankReport r;
      std::memcpy(&r, b.data(), sizeof(r));
      reports.push_back(r);
    }
    within = print_report(opts, pattern, reports) && within;
  }
  return within ? 0 : 1;
}

int one_rank(const Options& opts, int rank, Listener* listener, const std::string& host,
             uint16_t port) {
  std::unique_ptr<JobBootstrap> boot;
  try {
    boot = std::make_unique<JobBootstrap>(
        rank == 0 ? JobBootstrap::serve(*listener, opts.ranks, opts.timeout_s)
                  : JobBootstrap::join(host, port, rank, opts.ranks, opts.timeout_s));
    return run_rank_of_job(opts, *boot);
  } catch (const PeerError& e) {
    std::fprintf(stderr, "weft-perf (rank %d): a peer stopped: %s\n", rank, e.what());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "weft-perf (rank %d): error: %s\n", rank, e.what());
    if (boot) boot->send_error("rank " + std::to_string(rank) + ": " + e.what());
  }
  return 1;
}

int exit_status(int wait_status) {
  if (WIFEXITED(wait_status)) return WEXITSTATUS(wait_status);
  return 128 + (WIFSIGNALED(wait_status) ? WTERMSIG(wait_status) : 0);
}

}  // namespace

int run_job(const Options& opts) {
  if (opts.role == Role::client) return one_rank(opts, opts.rank, nullptr, opts.host, opts.port);
  if (opts.role == Role::server) {
    Listener listener(opts.port, /*loopback_only=*/false);
    std::fprintf(stderr, "# weft-perf job: rank 0 of %d%s%s, waiting on %s\n", opts.ranks,
                 opts.launcher.empty() ? "" : " under ", opts.launcher.c_str(),
                 listener.address().c_str());
    return one_rank(opts, 0, &listener, "", 0);
  }
  // --local: every rank forked on this host, over 127.0.0.1.
  Listener listener(0, /*loopback_only=*/true);
  std::fflush(stdout);
  std::fflush(stderr);
  const pid_t parent = getpid();
  std::vector<pid_t> children;
  for (int r = 1; r < opts.ranks; ++r) {
    const pid_t child = fork();
    if (child < 0) throw PerfError("fork failed");
    if (child == 0) {
      listener.close();
      prctl(PR_SET_PDEATHSIG, SIGTERM);  // do not outlive rank 0
      if (getppid() != parent) _exit(1);
      const int rc = one_rank(opts, r, nullptr, "127.0.0.1", listener.port());
      std::fflush(stdout);
      std::fflush(stderr);
      _exit(rc);
    }
    children.push_back(child);
  }
  int rc = one_rank(opts, 0, &listener, "", 0);
  if (rc != 0)
    for (pid_t child : children) kill(child, SIGTERM);
  for (size_t i = 0; i < children.size(); ++i) {
    int status = 0;
    while (waitpid(children[i], &status, 0) < 0 && errno == EINTR) {
    }
    const int child_rc = exit_status(status);
    if (child_rc != 0 && rc == 0) {
      std::fprintf(stderr, "weft-perf: rank %zu exited with status %d\n", i + 1, child_rc);
      rc = 1;
    }
  }
  return rc;
}

}  // namespace weft::perf
