#include "ofi/fabric/provider_quirks.h"

#include <rdma/fi_cm.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "core/provider_names.h"
#include "core/random.h"
#include "weft/log.h"

namespace weft::ofi {
namespace {

size_t size_from_env(const char* name, size_t fallback) {
  const char* text = std::getenv(name);
  if (text == nullptr || *text == 0) return fallback;
  char* end = nullptr;
  unsigned long long value = std::strtoull(text, &end, 0);
  return end != text && *end == 0 ? static_cast<size_t>(value) : fallback;
}

}  // namespace

void avoid_segmented_truncation(const std::string& device, const std::string& provider,
                                bool tagged) {
  if (!tagged || provider != "verbs;ofi_rxm") return;
  if (const char* set = std::getenv("FI_OFI_RXM_SAR_LIMIT")) {
    WEFT_INFO(NCCL_INIT,
              "%s: FI_OFI_RXM_SAR_LIMIT=%s kept: a truncated segmented message crashes rxm's "
              "receiver",
              device.c_str(), set);
    return;
  }
  ::setenv("FI_OFI_RXM_SAR_LIMIT", "0", 0);
  WEFT_INFO(NCCL_INIT,
            "%s: FI_OFI_RXM_SAR_LIMIT=0: tagged messages above rxm's eager limit go by rendezvous "
            "(a truncated segmented one crashes rxm's receiver)",
            device.c_str());
}

void send_nothing_from_staging(const std::string& provider) {
  if (core_provider(provider) != "tcp") return;
  if (const char* set = std::getenv("FI_TCP_STAGING_SBUF_SIZE")) {
    if (std::strcmp(set, "0") != 0) {
      WEFT_INFO(NCCL_INIT,
                "FI_TCP_STAGING_SBUF_SIZE=%s kept: a small send that meets a full socket is "
                "reported done before it leaves this process, and leaves at a later call into the "
                "provider (a peer may wait for it)",
                set);
    }
    return;
  }
  ::setenv("FI_TCP_STAGING_SBUF_SIZE", "0", 0);
  WEFT_INFO(NCCL_INIT,
            "FI_TCP_STAGING_SBUF_SIZE=0: a send is done once the kernel has it, not a staging "
            "buffer that only a later call would empty");
}

bool name_endpoint_uniquely(const std::string& device, const std::string& provider, fid_ep* ep) {
  if (provider != "shm") return true;
  // One random part per process: with the pid it cannot repeat a name of a
  // dead process that had the same pid; the counter tells endpoints apart.
  static const uint64_t process_part = random_nonzero_u64();
  static std::atomic<uint32_t> counter{0};
  char name[96];
  std::snprintf(name, sizeof(name), "fi_shm://weft-%d-%016llx-%u", static_cast<int>(getpid()),
                static_cast<unsigned long long>(process_part), counter.fetch_add(1));
  int rc = fi_setname(&ep->fid, name, std::strlen(name) + 1);
  if (rc != 0) {
    WEFT_WARN("%s: naming the shm endpoint %s failed: %s (%d)", device.c_str(), name,
              fi_strerror(-rc), rc);
    return false;
  }
  return true;
}

std::string unexpected_message_limit_warning(const std::string& provider, uint32_t version) {
  if (provider != "shm" || FI_VERSION_GE(version, FI_VERSION(1, 19))) return {};
  return "libfabric " + std::to_string(FI_MAJOR(version)) + "." +
         std::to_string(FI_MINOR(version)) +
         "'s shm stops delivering unexpected messages past a few hundred at once "
         "(ofiwg/libfabric#9143, fixed in 1.19): under the rdma protocol, a message on each of "
         "a thousand comms at once (a clear-to-send per receive, or an eager send) may stall; "
         "use the tagged "
         "protocol (WEFT_OFI_PROTOCOL=auto) or libfabric >= 1.19 (docs/scale.md)";
}

std::string receive_queue_hint(const std::string& provider) {
  // libfabric 1.17's and 2.6's variables and defaults; the utility
  // provider on top owns the queue weft posts to.
  struct Queue {
    const char* provider;
    const char* variable;
    const char* fallback;
  };
  static constexpr Queue kQueues[] = {
      {"ofi_rxm", "FI_OFI_RXM_RX_SIZE", "2048"}, {"ofi_rxd", "FI_OFI_RXD_RX_SIZE", "1024"},
      {"shm", "FI_SHM_RX_SIZE", "1024"},         {"efa", "FI_EFA_RX_SIZE", nullptr},
      {"tcp", "FI_TCP_RX_SIZE", "256"},          {"verbs", "FI_VERBS_RX_SIZE", "384"},
  };
  for (const Queue& queue : kQueues) {
    if (provider.find(queue.provider) == std::string::npos) continue;
    const char* set = std::getenv(queue.variable);
    if (set != nullptr) return std::string(queue.variable) + " (set to " + set + ")";
    if (queue.fallback == nullptr) return std::string(queue.variable) + " (not set)";
    return std::string(queue.variable) + " (not set: " + queue.fallback + ")";
  }
  return {};
}

std::string receive_queue_full_note(const std::string& provider) {
  std::string hint = receive_queue_hint(provider);
  if (hint.empty()) return {};
  return " (the provider's receive queue is full: each receive posted to it takes an entry; "
         "its size: " +
         hint + ")";
}

// fi_enable's EINVAL on verbs;ofi_rxm says nothing about why. The usual
// cause: rxm opens one verbs completion queue per endpoint sized from its
// own settings, whatever weft asks for its queue, and the device allows
// fewer entries (ibv_devinfo -v: max_cqe; Soft-RoCE 32767, real NICs
// millions). Name the numbers and the variables that change them.
void explain_enable_failure(const std::string& device, const fi_info* info, int rc) {
  const char* provider = info->fabric_attr->prov_name;
  if (rc != -FI_EINVAL || provider == nullptr || std::strstr(provider, "verbs") == nullptr ||
      std::strstr(provider, "ofi_rxm") == nullptr) {
    return;
  }
  // rxm's defaults (1.17 and 2.6): 128 entries per connection each way;
  // FI_UNIVERSE_SIZE 256 on libfabric 1.x, 1024 on 2.x.
  size_t universe = size_from_env("FI_UNIVERSE_SIZE", FI_MAJOR(fi_version()) >= 2 ? 1024 : 256);
  size_t tx = size_from_env("FI_OFI_RXM_MSG_TX_SIZE", 128);
  size_t rx = size_from_env("FI_OFI_RXM_MSG_RX_SIZE", 128);
  if (universe == 0 || tx + rx == 0) return;
  WEFT_WARN(
      "%s: rxm sizes its verbs completion queue as (FI_OFI_RXM_MSG_TX_SIZE + "
      "FI_OFI_RXM_MSG_RX_SIZE) x FI_UNIVERSE_SIZE = (%zu + %zu) x %zu = %zu entries, whatever "
      "weft asks for; fi_enable fails with EINVAL when that exceeds the device's max_cqe "
      "(ibv_devinfo -v; Soft-RoCE allows 32767). Fix: set FI_UNIVERSE_SIZE to at most max_cqe / "
      "%zu (FI_UNIVERSE_SIZE=%zu for 32767), or lower "
      "FI_OFI_RXM_MSG_TX_SIZE/FI_OFI_RXM_MSG_RX_SIZE",
      device.c_str(), tx, rx, universe, (tx + rx) * universe, tx + rx, 32767 / (tx + rx));
}

// libfabric's rxm (1.17 and 2.6) closes a connection by closing its verbs
// endpoint first and then handling what is left in its internal completion
// queue (rxm_close_conn: fi_close(msg_ep), then rxm_flush_msg_cq). A message
// that arrived but was never progressed is handled there as usual: rxm posts
// a fresh receive buffer in its place on the endpoint it just closed
// (rxm_handle_recv_comp -> rxm_replace_rx_buf -> rxm_post_recv), a use
// after free that crashes fi_close(ep). Reading our completion queue drives
// rxm's progress, which handles those messages while every connection is
// still open. Completions read here are dropped: the comms they belonged
// to are gone. Bounded, so a peer that keeps sending cannot hold us here.
void drain_before_close(fid_cq* cq) {
  constexpr int kQuietReads = 64;  // rxm handles up to 32 of its own per read
  constexpr auto kLimit = std::chrono::milliseconds(200);
  auto deadline = std::chrono::steady_clock::now() + kLimit;
  constexpr size_t kBatch = 256;
  fi_cq_tagged_entry entries[kBatch];
  int quiet = 0;
  while (quiet < kQuietReads && std::chrono::steady_clock::now() < deadline) {
    ssize_t count = fi_cq_read(cq, entries, kBatch);
    if (count == -FI_EAVAIL) {
      fi_cq_err_entry error{};
      count = fi_cq_readerr(cq, &error, 0);
    }
    if (count == -FI_EAGAIN) {
      ++quiet;
    } else if (count > 0) {
      quiet = 0;
    } else {
      return;  // the queue is broken: nothing more to progress
    }
  }
}

bool resends_only_while_progressed(const std::string& provider) {
  // prov/efa/src/rdm: efa_rdm_ep_queue_rnr_pkt queues the packet, and only
  // the progress engine (efa_domain_progress_rdm_peers_and_queues, from
  // fi_cq_read) sends it again.
  return is_efa_provider(provider);
}

bool injects_done_on_return(const fi_info* info) {
  // prov/shm: smr_generic_inject copies into the peer's region at once.
  return std::string(info->fabric_attr->prov_name) == "shm";
}

bool completes_before_delivery(const std::string& provider) {
  // prov/tcp (2.x, xnet): a transmit is done once the socket took it, and
  // xnet_ep_disable drops the receive queue when the peer's reset comes.
  // 1.x's rxm over tcp completes the same way; there the reset fails the
  // clear-to-send while the RDMA write it answered is still unread.
  return provider == "tcp" || provider.starts_with("tcp;");
}

}  // namespace weft::ofi
