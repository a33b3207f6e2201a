// Where the connect requests of every listener of an endpoint arrive: a few
// receives of the endpoint's own at one tag (kConnectInboxTag), each request
// routed to the listener it names. NCCL listens for every connection of a
// setup round before any connects; when each listening comm kept a receive
// of its own posted until it accepted, the tagged protocol's 2,049th listen
// at once filled tcp;ofi_rxm's receive queue (1,025th on 1.17's shm) and
// failed. Now a listen costs the provider nothing, and a request waits for
// one of these receives in the provider's unexpected queue at worst.
//
// As many receives are posted as listeners are open, up to kMaxReceives:
// with no listener open (NCCL closes each after its accept) the inbox takes
// none of the provider's receive queue, which the tagged protocol's data
// receives fill (1.17's shm holds 1,024), and a burst of requests to many
// listeners finds receives up rather than waiting unexpected (1.17's shm
// loses those past a few hundred).
//
// Completions only mark a receive arrived (they run under the I/O lock);
// whichever listener calls take() next decodes the arrivals, keeps each
// that presents the secret of the listener it names (listen_secret.h) for
// that listener, drops the rest unanswered (logged at most once a second),
// and posts the receives again. So nothing that was never handed the
// handle is kept, and a flood of forgeries cannot crowd out the genuine
// request. Connection setup only: nothing here is on the data path.
#pragma once

#include <rdma/fi_domain.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>
#include <unordered_map>

#include "core/completion_target.h"
#include "nccl/types.h"
#include "ofi/endpoint/completion.h"
#include "ofi/wire/connection_messages.h"

namespace weft::ofi {

class Endpoint;

class ConnectInbox final : public CompletionTarget {
 public:
  static constexpr int kMaxReceives = 64;
  // Proven requests that wait for one listener's accept(); more are
  // dropped (a listener accepts one connect, NCCL's never more than a few).
  static constexpr size_t kMaxWaiting = 64;

  explicit ConnectInbox(Endpoint& endpoint);
  ~ConnectInbox();
  ConnectInbox(const ConnectInbox&) = delete;
  ConnectInbox& operator=(const ConnectInbox&) = delete;

  // Requests naming `listener_id` and presenting `secret` are kept for it
  // from now on. The first listener registers the receives.
  ncclResult_t open(uint32_t listener_id, uint64_t secret);
  // Drops what waits for it; later requests naming it are dropped. Cancels
  // the receives beyond the open listeners'.
  void close(uint32_t listener_id);
  // Receives posted now, cancelled ones included (tests).
  int posted() const;
  // The oldest proven request that arrived for `listener_id` in *request, *got
  // false when none did. Handles every arrival first. Fails only when the
  // receives cannot be posted again or one failed in the provider.
  ncclResult_t take(uint32_t listener_id, ConnectRequest* request, bool* got);

  // Requests dropped: undecodable, for no open listener, without its
  // secret, or beyond kMaxWaiting.
  uint64_t dropped() const { return dropped_.load(std::memory_order_relaxed); }

  void on_complete(uint32_t slot, size_t length, const uint64_t* remote_data) override;
  void on_error(uint32_t slot, int error, size_t overflow_length, const char* text) override;

 private:
  struct Receive {
    OpContext op;
    bool posted = false;
    bool cancelling = false;
    std::atomic<bool> arrived{false};
    std::atomic<bool> cancelled{false};
    std::atomic<int> error{0};
    size_t length = 0;
    char error_text[160] = {};
    uint8_t bytes[kConnectRequestSize] = {};
  };
  // The mutex held. Posts receives up to the open listeners' number;
  // EAGAIN leaves the rest for the next call.
  ncclResult_t post_idle();
  int wanted() const;
  ncclResult_t still_waiting();
  ncclResult_t handle_arrivals();
  void route(const Receive& receive);

  Endpoint& endpoint_;
  mutable std::mutex
      mutex_;  // all below; never held by a completion (I/O lock order: this, then I/O)
  bool started_ = false;
  fid_mr* mr_ = nullptr;  // receives_, registered by the first open()
  void* descriptor_ = nullptr;
  std::optional<std::chrono::steady_clock::time_point> unposted_since_;  // none posted since
  Receive receives_[kMaxReceives];
  struct Listener {
    uint64_t secret = 0;
    std::deque<ConnectRequest> waiting;
  };
  std::unordered_map<uint32_t, Listener> listeners_;  // the open ones, by id
  std::atomic<uint64_t> dropped_{0};
};

}  // namespace weft::ofi
