#include "ofi/endpoint/endpoint.h"

#include <rdma/fi_cm.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>

#include <algorithm>
#include <chrono>
#include <string>

#include "core/comm_id.h"
#include "core/line_order_guard.h"
#include "ofi/discovery/provider_discovery.h"
#include "ofi/endpoint/efa_settings.h"
#include "ofi/fabric/endpoint_options.h"
#include "ofi/fabric/provider_quirks.h"
#include "ofi/wire/rdma_wire.h"
#include "weft/log.h"

namespace weft::ofi {

ncclResult_t Endpoint::fail(const char* call, int rc) const {
  WEFT_WARN("%s: %s failed: %s (%d)", device_name_.c_str(), call, fi_strerror(-rc), rc);
  return ncclSystemError;
}

ncclResult_t Endpoint::open(const fi_info* info, const std::string& device_name,
                            const EndpointOptions& options, std::shared_ptr<Endpoint>* out) {
  std::shared_ptr<Endpoint> endpoint(new Endpoint());
  endpoint->device_name_ = device_name;
  endpoint->provider_name_ = info->fabric_attr->prov_name;
  endpoint->address_format_ = info->addr_format;
  endpoint->inject_size_ = info->tx_attr != nullptr ? info->tx_attr->inject_size : 0;
  endpoint->test_aids_ = TestAids::make(options.test_aids, kMaxBatch);
  endpoint->injects_ = !options.test_aids.hold_injects && injects_done_on_return(info);
  endpoint->cq_read_count_ = std::clamp(options.cq_read_count, 1, kMaxBatch);
  endpoint->rma_ = (info->caps & FI_RMA) != 0;
  endpoint->rdma_ = options.rdma && endpoint->rma_;
  endpoint->one_sided_ = options.one_sided && endpoint->rma_;
  // libfabric 1.17's shm loses atomics asked for delivery completion under
  // load; it keeps order, so it is never asked.
  if (options.one_sided_ordered) endpoint->one_sided_flags_ = FI_COMPLETION;
  endpoint->max_write_size_ = info->ep_attr->max_msg_size;
  endpoint->weft_matching_ = options.weft_matching && endpoint->rdma_;
  endpoint->eager_size_ = options.eager_size;
  if (endpoint->rdma_) endpoint->fit_message_pool(info->ep_attr->max_msg_size);
  endpoint->eager_buffers_ = std::clamp(options.eager_buffers, 1, 255);
  endpoint->max_message_ = options.max_message;
  endpoint->iov_limit_ = info->tx_attr != nullptr ? info->tx_attr->iov_limit : 1;
  if (endpoint->rdma_) {
    endpoint->write_targets_.assign(65536, nullptr);
    for (uint32_t index = 65535; index >= 1; --index) {
      endpoint->free_write_targets_.push_back(static_cast<uint16_t>(index));
    }
  }

  ncclResult_t opened = endpoint->domain_.open(info, device_name, options.domain);
  if (opened != ncclSuccess) return opened;
  fid_domain* domain = endpoint->domain_.get();

  fi_av_attr av_attr{};
  av_attr.type = FI_AV_TABLE;
  fid_av* av = nullptr;
  int rc = fi_av_open(domain, &av_attr, &av, nullptr);
  if (rc != 0) return endpoint->fail("fi_av_open", rc);
  endpoint->av_.reset(av);

  fi_cq_attr cq_attr{};
  // Fabrics without FI_TAGGED (efa-direct) have no tagged entry format.
  cq_attr.format = endpoint->weft_matching_ ? FI_CQ_FORMAT_DATA : FI_CQ_FORMAT_TAGGED;
  cq_attr.size = static_cast<size_t>(options.cq_size);
  cq_attr.wait_obj = FI_WAIT_NONE;
  fid_cq* cq = nullptr;
  rc = fi_cq_open(domain, &cq_attr, &cq, nullptr);
  if (rc != 0) {
    ncclResult_t result = endpoint->fail("fi_cq_open", rc);
    if (rc == -FI_EINVAL) {
      WEFT_WARN(
          "%s: the provider refused a completion queue of %zu entries: lower WEFT_OFI_CQ_SIZE",
          device_name.c_str(), cq_attr.size);
    }
    return result;
  }
  endpoint->cq_.reset(cq);

  fid_ep* ep = nullptr;
  rc = fi_endpoint(domain, const_cast<fi_info*>(info), &ep, nullptr);
  if (rc != 0) return endpoint->fail("fi_endpoint", rc);
  endpoint->ep_.reset(ep);
  if (is_efa_provider(endpoint->provider_name_)) {
    ncclResult_t result = endpoint->settle_efa_settings();
    if (result != ncclSuccess) return result;
  } else if (endpoint->domain_.gpu_memory()) {
    // Per endpoint: init found the provider accepts it (gpu_support.cpp).
    FabricOptionCalls calls(ep);
    std::string refusal;
    if (!forbid_cuda_calls(calls, device_name, &refusal)) {
      WEFT_WARN("%s: %s, but NCCL was told at init that this device takes GPU memory",
                device_name.c_str(), refusal.c_str());
      return ncclSystemError;
    }
  }

  if (!name_endpoint_uniquely(device_name, endpoint->provider_name_, ep)) return ncclSystemError;
  rc = fi_ep_bind(ep, &av->fid, 0);
  if (rc != 0) return endpoint->fail("fi_ep_bind(av)", rc);
  rc = fi_ep_bind(ep, &cq->fid, FI_TRANSMIT | FI_RECV);
  if (rc != 0) return endpoint->fail("fi_ep_bind(cq)", rc);
  rc = fi_enable(ep);
  if (rc != 0) {
    ncclResult_t result = endpoint->fail("fi_enable", rc);
    explain_enable_failure(device_name, info, rc);
    return result;
  }
  endpoint->enabled_ = true;

  size_t address_size = sizeof(endpoint->local_address_);
  rc = fi_getname(&ep->fid, endpoint->local_address_, &address_size);
  if (rc != 0) return endpoint->fail("fi_getname", rc);
  endpoint->local_address_size_ = address_size;

  if (endpoint->weft_matching_) {
#if FI_MAJOR_VERSION >= 2
    // ep_attr->max_msg_size is the larger of the message and RMA limits
    // where a fabric has both (efa-direct: the MTU and max_rdma_size).
    // Asked after fi_enable: 2.6's shm dereferences state that only
    // fi_enable creates.
    size_t max_send = 0;
    size_t length = sizeof(max_send);
    if (fi_getopt(&ep->fid, FI_OPT_ENDPOINT, FI_OPT_MAX_MSG_SIZE, &max_send, &length) == 0) {
      endpoint->fit_message_pool(max_send);
    }
#endif
    ncclResult_t result = endpoint->open_message_pool();
    if (result != ncclSuccess) return result;
  }
  if (endpoint->domain_.flush_method() == FlushMethod::Read || endpoint->rdma_) {
    // Flush reads and eager copies into GPU memory target this endpoint.
    ncclResult_t result = endpoint->open_flush_target();
    if (result != ncclSuccess) return result;
  }
  std::string problem;
  if (endpoint->rdma_ && !endpoint->probe_writes(&problem)) {
    WEFT_WARN("%s: a test write to itself failed (%s): using the tagged protocol",
              device_name.c_str(), problem.c_str());
    endpoint->rdma_ = false;
  }
  if (endpoint->rdma_ && !endpoint->weft_matching_) {
    // Only now: its receives take any tag, which the tagged protocol's
    // data must not meet.
    ncclResult_t result = endpoint->open_message_pool();
    if (result != ncclSuccess) return result;
  }
  if (endpoint->rdma_) {
    // Registered as clear-to-sends first need them, none for injecting providers.
    endpoint->control_copies_ =
        std::make_unique<ControlSendCopies>(*endpoint, kCtsMaxSize, options.control_sends);
  }
  if (!options.one_sided) endpoint->connect_inbox_ = std::make_unique<ConnectInbox>(*endpoint);
  *out = std::move(endpoint);
  return ncclSuccess;
}

// Init found the answers on a scratch endpoint and told NCCL what follows
// from them; an endpoint that answers otherwise must not carry data.
ncclResult_t Endpoint::settle_efa_settings() {
  FabricOptionCalls calls(ep_.get());
  EfaWanted wanted;
  wanted.gpu = domain_.gpu_memory();
  wanted.rdma = rdma_;
  EfaOutcome outcome = apply_efa_settings(calls, wanted, device_name_);
  if (wanted.rdma && !outcome.writes_native && weft_matching_) {
    WEFT_WARN("%s: %s on this endpoint, unlike at init, and its fabric has no tagged protocol",
              device_name_.c_str(), outcome.writes_reason.c_str());
    return ncclSystemError;
  }
  if (wanted.rdma && !outcome.writes_native) {
    WEFT_WARN("%s: %s on this endpoint, unlike at init: using the tagged protocol",
              device_name_.c_str(), outcome.writes_reason.c_str());
    rdma_ = false;
    wanted.rdma = false;
    outcome = apply_efa_settings(calls, wanted, device_name_);
  }
  if (wanted.gpu && !outcome.gpu) {
    WEFT_WARN("%s: %s, but NCCL was told at init that this device takes GPU memory",
              device_name_.c_str(), outcome.gpu_refusal.c_str());
    return ncclSystemError;
  }
  // NCCL's LL and LL128 protocols never run over one-sided endpoints.
  if (one_sided_) return ncclSuccess;
  return LineOrderGuard::process().report(
      device_name_, outcome.ordered_128,
      outcome.order_refusal + ": aligned 128-byte lines may arrive out of order");
}

Endpoint::~Endpoint() {
  // Reading the queue of an endpoint that never enabled crashes shm.
  if (ep_ && cq_ && enabled_) {
    if (late_messages_.load(std::memory_order_relaxed)) {
      // A clear-to-send on its way arrives within a few round trips; one
      // that never comes (the receiver had those messages before it posted
      // their receives, and skipped it) must not cost much: stop once
      // nothing arrived for a while.
      constexpr auto kQuiet = std::chrono::milliseconds(20);
      constexpr int kLingerMs = 100;
      auto quiet_since = std::chrono::steady_clock::now();
      uint64_t seen = batches_read_;
      drain(*this, kLingerMs, [&] {
        auto now = std::chrono::steady_clock::now();
        if (batches_read_ != seen) {
          seen = batches_read_;
          quiet_since = now;
        }
        return now - quiet_since >= kQuiet;
      });
    }
    drain_before_close(cq_.get());
  }
  // Close the endpoint first: after that no completion can reach an orphan.
  ep_.reset();
  orphans_.clear();
  control_copies_.reset();
  connect_inbox_.reset();
  if (flush_mr_ != nullptr) fi_close(&flush_mr_->fid);
  if (pool_mr_ != nullptr) fi_close(&pool_mr_->fid);
  av_.reset();
  cq_.reset();
  // The domain (a member) closes after this, then the fabric.
}

ncclResult_t Endpoint::open_flush_target() {
  MemorySource host;
  Registration registration;
  const char* failed_call = nullptr;
  int rc = register_region(flush_buffer_, sizeof(flush_buffer_), host, flush_buffer_, &registration,
                           &failed_call);
  if (rc != 0) return fail(failed_call, rc);
  flush_mr_ = registration.mr;
  flush_descriptor_ = registration.descriptor;
  int inserted = fi_av_insert(av_.get(), local_address_, 1, &self_, 0, nullptr);
  if (inserted != 1) return fail("fi_av_insert(self)", inserted < 0 ? inserted : -FI_EINVAL);
  return ncclSuccess;
}

void Endpoint::fit_message_pool(size_t max_send) {
  // A pool buffer takes the largest message: an eager one (size capped to
  // what the fabric sends in one message) or a control message.
  max_send = std::max(max_send, kMinPoolSlot);
  eager_size_ = std::min(eager_size_, max_send - kEagerMargin);
  pool_slot_size_ = std::max(eager_size_ + kEagerMargin, kMinPoolSlot);
}

ncclResult_t Endpoint::open_message_pool() {
  size_t bytes = pool_slot_size_ * kPoolSlots;
  pool_ = std::make_unique<uint8_t[]>(bytes);
  MemorySource host;
  Registration registration;
  const char* failed_call = nullptr;
  int rc = register_region(pool_.get(), bytes, host, pool_.get(), &registration, &failed_call);
  if (rc != 0) return fail(failed_call, rc);
  pool_mr_ = registration.mr;
  pool_descriptor_ = registration.descriptor;
  pool_ops_ = std::make_unique<OpContext[]>(kPoolSlots);
  unposted_.reserve(kPoolSlots);
  matcher_ = std::make_unique<MessageMatcher>(kPoolSlots, pool_.get(), pool_slot_size_);
  matcher_->open_id(0);  // the connect inbox's (kConnectInboxTag)
  std::lock_guard<std::mutex> lock(domain_.io_mutex());
  pooled_ = true;
  for (int slot = 0; slot < kPoolSlots; ++slot) {
    pool_ops_[slot].slot = static_cast<uint32_t>(slot);
    post_pool_slot(slot);
  }
  WEFT_INFO(NCCL_INIT | NCCL_NET,
            "%s: weft matches the control messages (%s): %d receive buffers of %zu bytes, "
            "eager messages up to %zu bytes",
            device_name_.c_str(), weft_matching_ ? "plain messages" : "tagged messages", kPoolSlots,
            pool_slot_size_, eager_size_);
  return ncclSuccess;
}

bool Endpoint::probe_writes(std::string* problem) {
  fi_context2 context{};
  auto base = reinterpret_cast<uintptr_t>(flush_buffer_);
  uint64_t remote = (domain_.mr_mode() & FI_MR_VIRT_ADDR) != 0 ? base + 32 : 32;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  ssize_t rc;
  fi_cq_tagged_entry entry{};
  while ((rc = fi_writedata(ep_.get(), flush_buffer_, 8, flush_descriptor_, 0, self_, remote,
                            fi_mr_key(flush_mr_), &context)) == -FI_EAGAIN) {
    fi_cq_read(cq_.get(), &entry, 1);
    if (std::chrono::steady_clock::now() > deadline) break;
  }
  if (rc != 0) {
    *problem = std::string("fi_writedata: ") + fi_strerror((int)-rc);
    return false;
  }
  bool local = false, remote_seen = false;
  while (!(local && remote_seen)) {
    rc = fi_cq_read(cq_.get(), &entry, 1);
    if (rc == 1) {
      if (is_pool_op(entry.op_context)) {
        std::lock_guard<std::mutex> lock(domain_.io_mutex());
        post_pool_slot(static_cast<int>(static_cast<OpContext*>(entry.op_context)->slot));
      }
      if ((entry.flags & FI_REMOTE_WRITE) != 0) {
        remote_seen = true;
        write_lengths_reported_ = entry.len == 8;
      } else if (entry.op_context == &context) {
        local = true;
      }
      continue;
    }
    if (rc == -FI_EAVAIL) {
      fi_cq_err_entry error{};
      fi_cq_readerr(cq_.get(), &error, 0);
      *problem = std::string("completion error: ") + fi_strerror(error.err);
      return false;
    }
    if (rc != -FI_EAGAIN) {
      *problem = std::string("fi_cq_read: ") + fi_strerror((int)-rc);
      return false;
    }
    if (std::chrono::steady_clock::now() > deadline) {
      *problem = "no completion within 5 s";
      return false;
    }
  }
  if (!write_lengths_reported_) {
    WEFT_INFO(NCCL_INIT | NCCL_NET,
              "%s: write completions carry no length here: senders add a size notice",
              device_name_.c_str());
  }
  return true;
}

uint32_t Endpoint::next_id() {
  // Weft's matching carries ids in 30 bits (message_matcher.h).
  const uint32_t mask = pooled_ ? kMaxCompactId : kMaxCommId;
  for (;;) {
    uint32_t id = next_id_.fetch_add(1, std::memory_order_relaxed) & mask;
    if (id == 0) continue;
    if (pooled_) {
      std::lock_guard<std::mutex> lock(domain_.io_mutex());
      matcher_->open_id(id);
    }
    return id;
  }
}

void Endpoint::release_id(uint32_t id) {
  if (!pooled_) return;
  std::vector<int> released;
  std::lock_guard<std::mutex> lock(domain_.io_mutex());
  matcher_->close_id(id, &released);
  for (int slot : released) return_pool_slot(slot);
}

void Endpoint::adopt(std::unique_ptr<Comm> orphan) {
  std::lock_guard<std::mutex> lock(mutex_);
  orphans_.push_back(std::move(orphan));
}

}  // namespace weft::ofi
