#include "job_bootstrap.h"

#include <algorithm>
#include <cstring>
#include <optional>

#include "errors.h"

namespace weft::perf {
namespace {

constexpr uint32_t kJobMagic = 0x4a544657;  // "WFTJ"

struct JobHello {
  uint32_t magic = kJobMagic;
  int32_t rank = 0;
  int32_t ranks = 0;
};

}  // namespace

void append_piece(Bytes& out, const void* data, size_t size) {
  uint64_t length = size;
  const auto* l = reinterpret_cast<const uint8_t*>(&length);
  out.insert(out.end(), l, l + sizeof(length));
  const auto* d = static_cast<const uint8_t*>(data);
  out.insert(out.end(), d, d + size);
}

std::vector<Bytes> split_pieces(const Bytes& in) {
  std::vector<Bytes> pieces;
  size_t at = 0;
  while (at < in.size()) {
    uint64_t length = 0;
    if (in.size() - at < sizeof(length)) throw PerfError("bootstrap: a job message is truncated");
    std::memcpy(&length, in.data() + at, sizeof(length));
    at += sizeof(length);
    if (length > in.size() - at) throw PerfError("bootstrap: a job message is truncated");
    pieces.emplace_back(in.begin() + static_cast<ptrdiff_t>(at),
                        in.begin() + static_cast<ptrdiff_t>(at + length));
    at += length;
  }
  return pieces;
}

JobBootstrap JobBootstrap::serve(Listener& listener, int ranks, int timeout_s) {
  JobBootstrap job(0, ranks);
  std::vector<std::optional<Bootstrap>> by_rank(static_cast<size_t>(ranks));
  for (int joined = 1; joined < ranks; ++joined) {
    Bootstrap boot = listener.accept(timeout_s);
    boot.set_timeout(timeout_s);
    const auto hello = boot.recv_pod<JobHello>(MsgKind::job);
    if (hello.magic != kJobMagic || hello.ranks != ranks || hello.rank < 1 || hello.rank >= ranks ||
        by_rank[static_cast<size_t>(hello.rank)]) {
      const std::string why = "bootstrap: " + boot.peer() + " joined as rank " +
                              std::to_string(hello.rank) + " of " + std::to_string(hello.ranks) +
                              "; this job has " + std::to_string(ranks) +
                              " ranks, each joining once";
      boot.send_error(why);
      throw PerfError(why);
    }
    by_rank[static_cast<size_t>(hello.rank)] = std::move(boot);
  }
  for (int r = 1; r < ranks; ++r) job.links_.push_back(std::move(*by_rank[static_cast<size_t>(r)]));
  job.barrier();
  return job;
}

JobBootstrap JobBootstrap::join(const std::string& host, uint16_t port, int rank, int ranks,
                                int timeout_s) {
  JobBootstrap job(rank, ranks);
  Bootstrap boot = Bootstrap::connect(host, port, timeout_s);
  boot.set_timeout(timeout_s);
  JobHello hello;
  hello.rank = rank;
  hello.ranks = ranks;
  boot.send_pod(MsgKind::job, hello);
  job.links_.push_back(std::move(boot));
  job.barrier();
  return job;
}

void JobBootstrap::send_bytes(Bootstrap& to, const Bytes& bytes) {
  const uint64_t length = bytes.size();
  to.send_pod(MsgKind::job, length);
  // Pieces of at most 8 MiB: the bootstrap's frames are bounded.
  constexpr size_t kFrame = size_t{8} << 20;
  for (size_t at = 0; at < bytes.size(); at += kFrame)
    to.send(MsgKind::job, bytes.data() + at, std::min(kFrame, bytes.size() - at));
}

Bytes JobBootstrap::recv_bytes(Bootstrap& from) {
  const auto length = from.recv_pod<uint64_t>(MsgKind::job);
  // The largest a job sends is one rank's handles for all the others
  // (63 peers x 16,384 channels x 132 bytes: 136 MB); more is garbage.
  constexpr uint64_t kMaxMessage = uint64_t{256} << 20;
  if (length > kMaxMessage) {
    throw PerfError("bootstrap: " + from.peer() + " announces a job message of " +
                    std::to_string(length) + " bytes (at most " + std::to_string(kMaxMessage) +
                    ")");
  }
  Bytes bytes(length);
  constexpr size_t kFrame = size_t{8} << 20;
  for (size_t at = 0; at < bytes.size(); at += kFrame)
    from.recv(MsgKind::job, bytes.data() + at, std::min(kFrame, bytes.size() - at));
  return bytes;
}

std::vector<Bytes> JobBootstrap::exchange(const std::vector<Bytes>& to_rank) {
  // Everything goes to rank 0, which hands each rank what was sent to it.
  std::vector<Bytes> mail = gather([&] {
    Bytes packed;
    for (const Bytes& b : to_rank) append_piece(packed, b.data(), b.size());
    return packed;
  }());
  if (rank_ != 0) return split_pieces(recv_bytes(link(0)));
  std::vector<std::vector<Bytes>> sent(static_cast<size_t>(ranks_));  // [from][to]
  for (int from = 0; from < ranks_; ++from) {
    sent[static_cast<size_t>(from)] = split_pieces(mail[static_cast<size_t>(from)]);
    if (sent[static_cast<size_t>(from)].size() != static_cast<size_t>(ranks_))
      throw PerfError("bootstrap: rank " + std::to_string(from) + " addressed " +
                      std::to_string(sent[static_cast<size_t>(from)].size()) + " ranks, not " +
                      std::to_string(ranks_));
  }
  std::vector<Bytes> mine;
  for (int to = 0; to < ranks_; ++to) {
    std::vector<Bytes> inbox;
    for (int from = 0; from < ranks_; ++from)
      inbox.push_back(std::move(sent[static_cast<size_t>(from)][static_cast<size_t>(to)]));
    if (to == 0) {
      mine = std::move(inbox);
      continue;
    }
    Bytes packed;
    for (const Bytes& b : inbox) append_piece(packed, b.data(), b.size());
    send_bytes(link(to), packed);
  }
  return mine;
}

std::vector<Bytes> JobBootstrap::gather(const Bytes& mine) {
  if (rank_ != 0) {
    send_bytes(link(0), mine);
    return {};
  }
  std::vector<Bytes> all{mine};
  for (int r = 1; r < ranks_; ++r) {
    try {
      all.push_back(recv_bytes(link(r)));
    } catch (const PeerError& e) {
      throw PeerError("rank " + std::to_string(r) + ": " + e.what());
    }
  }
  return all;
}

void JobBootstrap::barrier() {
  gather({});
  if (rank_ == 0) {
    for (int r = 1; r < ranks_; ++r) send_bytes(link(r), {});
  } else {
    recv_bytes(link(0));
  }
}

std::vector<int> JobBootstrap::settle() {
  std::vector<int> gone;
  if (rank_ != 0) {
    send_bytes(link(0), {});
    const Bytes list = recv_bytes(link(0));
    for (size_t at = 0; at + sizeof(int32_t) <= list.size(); at += sizeof(int32_t)) {
      int32_t r = 0;
      std::memcpy(&r, list.data() + at, sizeof(r));
      gone.push_back(r);
    }
    return gone;
  }
  std::vector<bool> alive(static_cast<size_t>(ranks_), true);
  for (int r = 1; r < ranks_; ++r) {
    try {
      recv_bytes(link(r));
    } catch (const PerfError&) {
      alive[static_cast<size_t>(r)] = false;
      gone.push_back(r);
    }
  }
  Bytes list;
  for (int32_t r : gone) {
    const auto* b = reinterpret_cast<const uint8_t*>(&r);
    list.insert(list.end(), b, b + sizeof(r));
  }
  for (int r = 1; r < ranks_; ++r) {
    if (!alive[static_cast<size_t>(r)]) continue;
    try {
      send_bytes(link(r), list);
    } catch (const PerfError&) {
    }
  }
  return gone;
}

void JobBootstrap::send_error(const std::string& text) noexcept {
  if (rank_ != 0) {
    if (!links_.empty()) links_[0].send_error(text);
    return;
  }
  for (Bootstrap& b : links_) b.send_error(text);
}

}  // namespace weft::perf
