// The bootstrap of a job of N ranks (weft-perf --job): every rank holds a
// TCP connection to rank 0, which passes messages between ranks (a star, as
// NCCL's bootstrap ring is for its own setup: handles go through it, data
// never does). Rank 0 listens; rank r connects and says who it is.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "bootstrap.h"

namespace weft::perf {

using Bytes = std::vector<uint8_t>;

class JobBootstrap {
 public:
  // Rank 0: takes the other ranks' connections on `listener`.
  static JobBootstrap serve(Listener& listener, int ranks, int timeout_s);
  // Rank `rank` (1..ranks-1): connects to rank 0 at host:port.
  static JobBootstrap join(const std::string& host, uint16_t port, int rank, int ranks,
                           int timeout_s);

  int rank() const { return rank_; }
  int ranks() const { return ranks_; }

  // to_rank[r]: what this rank sends rank r. Returns what each rank sent
  // this one, by sender. Every rank calls it (a collective).
  std::vector<Bytes> exchange(const std::vector<Bytes>& to_rank);
  // Rank 0 returns every rank's `mine`, by rank; the others an empty list.
  std::vector<Bytes> gather(const Bytes& mine);
  void barrier();
  // A barrier that survives ranks that died: rank 0 waits for every rank
  // to arrive or be gone (its connection closed), then tells the living
  // ones which ranks are gone. Every rank gets that list (empty: none).
  std::vector<int> settle();
  // Best effort, never throws: rank 0 tells every rank, another rank tells
  // rank 0, why it stops.
  void send_error(const std::string& text) noexcept;

 private:
  JobBootstrap(int rank, int ranks) : rank_(rank), ranks_(ranks) {}
  // The connection to rank r (rank 0), or to rank 0 (others).
  Bootstrap& link(int r) { return rank_ == 0 ? links_[static_cast<size_t>(r - 1)] : links_[0]; }
  void send_bytes(Bootstrap& to, const Bytes& bytes);
  Bytes recv_bytes(Bootstrap& from);

  int rank_ = 0;
  int ranks_ = 0;
  std::vector<Bootstrap> links_;
};

// Length-prefixed pieces in one message (little-endian lengths).
void append_piece(Bytes& out, const void* data, size_t size);
// Splits what append_piece wrote; throws PerfError on a malformed message.
std::vector<Bytes> split_pieces(const Bytes& in);

}  // namespace weft::perf
