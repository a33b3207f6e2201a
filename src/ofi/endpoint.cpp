#include "ofi/endpoint.h"

#include <rdma/fi_cm.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>
#include <rdma/fi_tagged.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>

#include "core/comm_id.h"
#include "ofi/completion.h"
#include "ofi/peer_check.h"
#include "weft/log.h"

namespace weft::ofi {
namespace {

constexpr int kMaxBatch = 256;

ncclResult_t fail(const std::string& device, const char* call, int rc) {
  WEFT_WARN("%s: %s failed: %s (%d)", device.c_str(), call, fi_strerror(-rc), rc);
  return ncclSystemError;
}

size_t size_from_env(const char* name, size_t fallback) {
  const char* text = std::getenv(name);
  if (text == nullptr || *text == 0) return fallback;
  char* end = nullptr;
  unsigned long long value = std::strtoull(text, &end, 0);
  return end != text && *end == 0 ? static_cast<size_t>(value) : fallback;
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
  fi_cq_tagged_entry entries[kMaxBatch];
  int quiet = 0;
  while (quiet < kQuietReads && std::chrono::steady_clock::now() < deadline) {
    ssize_t count = fi_cq_read(cq, entries, kMaxBatch);
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

}  // namespace

ncclResult_t Endpoint::open(const fi_info* info, const std::string& device_name,
                            const EndpointOptions& options, std::shared_ptr<Endpoint>* out) {
  std::shared_ptr<Endpoint> endpoint(new Endpoint());
  endpoint->device_name_ = device_name;
  endpoint->provider_name_ = info->fabric_attr->prov_name;
  endpoint->mr_mode_ = info->domain_attr->mr_mode;
  endpoint->address_format_ = info->addr_format;
  endpoint->inject_size_ = info->tx_attr != nullptr ? info->tx_attr->inject_size : 0;
  endpoint->cq_read_count_ = std::clamp(options.cq_read_count, 1, kMaxBatch);
  endpoint->registration_cache_ = std::make_unique<RegistrationCache>(
      options.mr_cache, static_cast<size_t>(std::max(options.mr_cache_max_entries, 1)));
  endpoint->cuda_ = options.cuda;
  endpoint->gpu_memory_ = options.cuda != nullptr;
  endpoint->gpu_off_reason_ = options.gpu_off_reason;
  endpoint->dmabuf_ = options.dmabuf && options.cuda != nullptr;
  endpoint->rma_ = (info->caps & FI_RMA) != 0;
  endpoint->rdma_ = options.rdma && endpoint->rma_;
  endpoint->max_write_size_ = info->ep_attr->max_msg_size;
  endpoint->eager_size_ = options.eager_size;
  endpoint->eager_buffers_ = std::clamp(options.eager_buffers, 1, 255);
  endpoint->max_message_ = options.max_message;
  endpoint->iov_limit_ = info->tx_attr != nullptr ? info->tx_attr->iov_limit : 1;
  if (endpoint->rdma_) {
    endpoint->write_targets_.assign(65536, nullptr);
    for (uint32_t index = 65535; index >= 1; --index) {
      endpoint->free_write_targets_.push_back(static_cast<uint16_t>(index));
    }
  }
  endpoint->reorder_window_ = static_cast<size_t>(std::max(options.reorder_window, 0));
  endpoint->reorder_state_ = options.reorder_seed | 1;
  endpoint->held_.reserve(endpoint->reorder_window_ + kMaxBatch);
  endpoint->flush_ = options.flush;
  long page = sysconf(_SC_PAGESIZE);
  endpoint->page_size_ = page > 0 ? static_cast<size_t>(page) : 4096;

  fid_fabric* fabric = nullptr;
  int rc = fi_fabric(info->fabric_attr, &fabric, nullptr);
  if (rc != 0) return fail(device_name, "fi_fabric", rc);
  endpoint->fabric_.reset(fabric);

  fid_domain* domain = nullptr;
  rc = fi_domain(fabric, const_cast<fi_info*>(info), &domain, nullptr);
  if (rc != 0) return fail(device_name, "fi_domain", rc);
  endpoint->domain_.reset(domain);

  fi_av_attr av_attr{};
  av_attr.type = FI_AV_TABLE;
  fid_av* av = nullptr;
  rc = fi_av_open(domain, &av_attr, &av, nullptr);
  if (rc != 0) return fail(device_name, "fi_av_open", rc);
  endpoint->av_.reset(av);

  fi_cq_attr cq_attr{};
  cq_attr.format = FI_CQ_FORMAT_TAGGED;
  cq_attr.size = static_cast<size_t>(options.cq_size);
  cq_attr.wait_obj = FI_WAIT_NONE;
  fid_cq* cq = nullptr;
  rc = fi_cq_open(domain, &cq_attr, &cq, nullptr);
  if (rc != 0) {
    ncclResult_t result = fail(device_name, "fi_cq_open", rc);
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
  if (rc != 0) return fail(device_name, "fi_endpoint", rc);
  endpoint->ep_.reset(ep);

  rc = fi_ep_bind(ep, &av->fid, 0);
  if (rc != 0) return fail(device_name, "fi_ep_bind(av)", rc);
  rc = fi_ep_bind(ep, &cq->fid, FI_TRANSMIT | FI_RECV);
  if (rc != 0) return fail(device_name, "fi_ep_bind(cq)", rc);
  rc = fi_enable(ep);
  if (rc != 0) {
    ncclResult_t result = fail(device_name, "fi_enable", rc);
    explain_enable_failure(device_name, info, rc);
    return result;
  }

  size_t address_size = sizeof(endpoint->local_address_);
  rc = fi_getname(&ep->fid, endpoint->local_address_, &address_size);
  if (rc != 0) return fail(device_name, "fi_getname", rc);
  endpoint->local_address_size_ = address_size;

  if (endpoint->flush_ == FlushMethod::Read || endpoint->rdma_) {
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
  *out = std::move(endpoint);
  return ncclSuccess;
}

Endpoint::~Endpoint() {
  if (registration_cache_) {
    MrCacheStats stats = registration_cache_->stats();
    if (stats.lookups > 0) {
      WEFT_INFO(NCCL_NET,
                "%s: registration cache: %llu lookups, %llu hits, %llu registered, %llu uncached, "
                "%llu still registered",
                device_name_.c_str(), (unsigned long long)stats.lookups,
                (unsigned long long)stats.hits, (unsigned long long)stats.inserts,
                (unsigned long long)stats.uncached, (unsigned long long)stats.live);
    }
  }
  if (ep_ && cq_) drain_before_close(cq_.get());
  // Close the endpoint first: after that no completion can reach an orphan.
  ep_.reset();
  orphans_.clear();
  if (flush_mr_ != nullptr) fi_close(&flush_mr_->fid);
  av_.reset();
  cq_.reset();
  if (domain_) {
    int rc = fi_close(&domain_.release()->fid);
    if (rc != 0) {
      WEFT_WARN("%s: closing the domain failed: %s (memory still registered?)",
                device_name_.c_str(), fi_strerror(-rc));
    }
  }
  fabric_.reset();
}

ssize_t Endpoint::send(const void* buffer, size_t size, void* descriptor, fi_addr_t peer,
                       uint64_t tag, OpContext* context) {
  // The size travels as immediate data so the receiver can detect truncation.
  std::lock_guard<std::mutex> lock(io_mutex_);
  return fi_tsenddata(ep_.get(), buffer, size, descriptor, size, peer, tag,
                      &context->provider_context);
}

ssize_t Endpoint::inject(const void* buffer, size_t size, fi_addr_t peer, uint64_t tag) {
  std::lock_guard<std::mutex> lock(io_mutex_);
  return fi_tinjectdata(ep_.get(), buffer, size, size, peer, tag);
}

ssize_t Endpoint::receive(void* buffer, size_t size, void* descriptor, uint64_t tag,
                          OpContext* context) {
  std::lock_guard<std::mutex> lock(io_mutex_);
  return fi_trecv(ep_.get(), buffer, size, descriptor, FI_ADDR_UNSPEC, tag, 0,
                  &context->provider_context);
}

void Endpoint::cancel(OpContext* context) {
  std::lock_guard<std::mutex> lock(io_mutex_);
  fi_cancel(&ep_->fid, &context->provider_context);
}

int Endpoint::register_region(void* start, size_t length, const MemorySource& source,
                              const void* data, Registration* out, const char** failed_call) {
  iovec iov{start, length};
  fi_mr_attr attr{};
  attr.mr_iov = &iov;
  attr.iov_count = 1;
  // Reads serve the flush (the NIC reads back what it wrote).
  attr.access = FI_SEND | FI_RECV | (rma_ ? (FI_READ | FI_REMOTE_READ) : 0) |
                (rdma_ ? (FI_WRITE | FI_REMOTE_WRITE) : 0);
  attr.requested_key = mr_key_.fetch_add(1, std::memory_order_relaxed);
  attr.iface = FI_HMEM_SYSTEM;
  if (source.type == NCCL_PTR_CUDA) {
    attr.iface = FI_HMEM_CUDA;
    attr.device.cuda = source.device;
  }
  uint64_t flags = 0;
  if (source.type == NCCL_PTR_CUDA) {
    // cudaMalloc'd memory is never host-accessible; saying so lets shm map
    // it with CUDA IPC instead of copying through bounce buffers.
    flags |= FI_HMEM_DEVICE_ONLY;
  }
#ifdef FI_MR_DMABUF
  fi_mr_dmabuf dmabuf{};
  if (source.dmabuf_fd >= 0) {
    // base_addr is where offset 0 of the dma-buf is mapped.
    dmabuf.fd = source.dmabuf_fd;
    dmabuf.offset = source.dmabuf_offset;
    dmabuf.len = length;
    dmabuf.base_addr = static_cast<uint8_t*>(const_cast<void*>(data)) - source.dmabuf_offset;
    attr.dmabuf = &dmabuf;
    flags |= FI_MR_DMABUF;
  }
#else
  (void)data;
#endif
  std::lock_guard<std::mutex> lock(io_mutex_);
  fid_mr* mr = nullptr;
  *failed_call = "fi_mr_regattr";
  int rc = fi_mr_regattr(domain_.get(), &attr, flags, &mr);
  if (rc != 0) return rc;
  if ((mr_mode_ & FI_MR_ENDPOINT) != 0) {
    // Such providers scope MRs to an endpoint and want them enabled.
    *failed_call = "fi_mr_bind";
    rc = fi_mr_bind(mr, &ep_->fid, 0);
    if (rc == 0) {
      *failed_call = "fi_mr_enable";
      rc = fi_mr_enable(mr);
    }
    if (rc != 0) {
      fi_close(&mr->fid);
      return rc;
    }
  }
  out->mr = mr;
  out->descriptor = fi_mr_desc(mr);
  out->key = fi_mr_key(mr);
  out->start = reinterpret_cast<uintptr_t>(start);
  return 0;
}

ncclResult_t Endpoint::open_flush_target() {
  MemorySource host;
  Registration registration;
  const char* failed_call = nullptr;
  int rc = register_region(flush_buffer_, sizeof(flush_buffer_), host, flush_buffer_, &registration,
                           &failed_call);
  if (rc != 0) return fail(device_name_, failed_call, rc);
  flush_mr_ = registration.mr;
  flush_descriptor_ = registration.descriptor;
  int inserted = fi_av_insert(av_.get(), local_address_, 1, &self_, 0, nullptr);
  if (inserted != 1)
    return fail(device_name_, "fi_av_insert(self)", inserted < 0 ? inserted : -FI_EINVAL);
  return ncclSuccess;
}

bool Endpoint::probe_writes(std::string* problem) {
  fi_context2 context{};
  auto base = reinterpret_cast<uintptr_t>(flush_buffer_);
  uint64_t remote = (mr_mode_ & FI_MR_VIRT_ADDR) != 0 ? base + 32 : 32;
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

uint64_t Endpoint::remote_address(const void* data, const Registration& registration) const {
  auto address = reinterpret_cast<uintptr_t>(data);
  return (mr_mode_ & FI_MR_VIRT_ADDR) != 0 ? address : address - registration.start;
}

ssize_t Endpoint::flush_read(const void* data, const Registration& registration,
                             OpContext* context) {
  uint64_t remote = remote_address(data, registration);
  std::lock_guard<std::mutex> lock(io_mutex_);
  return fi_read(ep_.get(), flush_buffer_, 1, flush_descriptor_, self_, remote, registration.key,
                 &context->provider_context);
}

ssize_t Endpoint::write(const void* buffer, size_t size, void* descriptor, fi_addr_t peer,
                        uint64_t remote_address, uint64_t key, uint32_t immediate,
                        OpContext* context) {
  std::lock_guard<std::mutex> lock(io_mutex_);
  return fi_writedata(ep_.get(), buffer, size, descriptor, immediate, peer, remote_address, key,
                      &context->provider_context);
}

ssize_t Endpoint::write_self(const void* buffer, size_t size, void* descriptor, const void* target,
                             const Registration& registration, OpContext* context) {
  uint64_t remote = remote_address(target, registration);
  std::lock_guard<std::mutex> lock(io_mutex_);
  return fi_write(ep_.get(), buffer, size, descriptor, self_, remote, registration.key,
                  &context->provider_context);
}

ssize_t Endpoint::send_with_header(const void* header, size_t header_size, void* header_descriptor,
                                   const void* data, size_t size, void* data_descriptor,
                                   fi_addr_t peer, uint64_t tag, OpContext* context) {
  iovec iov[2] = {{const_cast<void*>(header), header_size}, {const_cast<void*>(data), size}};
  void* descriptors[2] = {header_descriptor, data_descriptor};
  std::lock_guard<std::mutex> lock(io_mutex_);
  return fi_tsendv(ep_.get(), iov, descriptors, size > 0 ? 2 : 1, peer, tag,
                   &context->provider_context);
}

uint16_t Endpoint::attach_write_target(RemoteWriteTarget* target) {
  std::lock_guard<std::mutex> lock(io_mutex_);
  if (free_write_targets_.empty()) return 0;
  uint16_t index = free_write_targets_.back();
  free_write_targets_.pop_back();
  write_targets_[index] = target;
  return index;
}

void Endpoint::detach_write_target(uint16_t index) {
  if (index == 0) return;
  std::lock_guard<std::mutex> lock(io_mutex_);
  write_targets_[index] = nullptr;
  free_write_targets_.push_back(index);
}

int Endpoint::close_region(fid_mr* mr) {
  std::lock_guard<std::mutex> lock(io_mutex_);
  return fi_close(&mr->fid);
}

void Endpoint::dispatch(const fi_cq_tagged_entry& entry) {
  if ((entry.flags & FI_REMOTE_WRITE) != 0 && (entry.flags & FI_REMOTE_CQ_DATA) != 0) {
    // A peer's data write: the immediate names the receiving comm.
    auto index = static_cast<uint16_t>(entry.data >> 16);
    RemoteWriteTarget* target = write_targets_.empty() ? nullptr : write_targets_[index];
    if (target == nullptr) {
      WEFT_WARN(
          "%s: dropping a remote write for receiver %u, which does not exist (immediate "
          "0x%08llx): a peer's protocol error or a comm closed mid-transfer",
          device_name_.c_str(), index, (unsigned long long)entry.data);
      return;
    }
    target->on_remote_write(static_cast<uint32_t>(entry.data), entry.len);
    return;
  }
  auto* op = static_cast<OpContext*>(entry.op_context);
  if (op == nullptr || op->target == nullptr) return;
  const uint64_t* data = (entry.flags & FI_REMOTE_CQ_DATA) ? &entry.data : nullptr;
  op->target->on_complete(op->slot, entry.len, data);
}

void Endpoint::deliver(fi_cq_tagged_entry* entries, ssize_t count) {
  if (reorder_window_ == 0) {
    for (ssize_t i = 0; i < count; ++i) dispatch(entries[i]);
    return;
  }
  for (ssize_t i = 0; i < count; ++i) held_.push_back(entries[i]);
  // Beyond the window, or when the queue ran dry, release one at random.
  size_t keep = count > 0 ? reorder_window_ : (held_.empty() ? 0 : held_.size() - 1);
  while (held_.size() > keep) {
    reorder_state_ ^= reorder_state_ << 13;
    reorder_state_ ^= reorder_state_ >> 7;
    reorder_state_ ^= reorder_state_ << 17;
    size_t pick = static_cast<size_t>(reorder_state_ % held_.size());
    fi_cq_tagged_entry entry = held_[pick];
    held_[pick] = held_.back();
    held_.pop_back();
    dispatch(entry);
  }
}

ncclResult_t Endpoint::poll() {
  fi_cq_tagged_entry entries[kMaxBatch];
  // Completion callbacks run under the lock; they only record results.
  std::lock_guard<std::mutex> lock(io_mutex_);
  ssize_t count = fi_cq_read(cq_.get(), entries, static_cast<size_t>(cq_read_count_));
  if (count > 0) {
    deliver(entries, count);
    return ncclSuccess;
  }
  if (count == -FI_EAGAIN) {
    deliver(entries, 0);
    return ncclSuccess;
  }
  if (count == -FI_EAVAIL) {
    fi_cq_err_entry error{};
    ssize_t rc = fi_cq_readerr(cq_.get(), &error, 0);
    if (rc < 0)
      return rc == -FI_EAGAIN ? ncclSuccess : fail(device_name_, "fi_cq_readerr", (int)rc);
    char text[256];
    const char* detail =
        fi_cq_strerror(cq_.get(), error.prov_errno, error.err_data, text, sizeof(text));
    auto* op = static_cast<OpContext*>(error.op_context);
    if (op != nullptr && op->target != nullptr) {
      int code = error.err == FI_ETRUNC ? kTruncated : error.err;
      op->target->on_error(op->slot, code, error.olen, detail != nullptr ? detail : "");
    } else {
      WEFT_WARN("%s: completion error without context: %s (%s)", device_name_.c_str(),
                fi_strerror(error.err), detail != nullptr ? detail : "");
    }
    return ncclSuccess;
  }
  if (!cq_failed_.exchange(true)) fail(device_name_, "fi_cq_read", static_cast<int>(count));
  return ncclSystemError;
}

ncclResult_t Endpoint::insert_address(const uint8_t* address, size_t size, fi_addr_t* out) {
  std::string key(reinterpret_cast<const char*>(address), size);
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = address_cache_.find(key);
  if (it != address_cache_.end()) {
    *out = it->second;
    return ncclSuccess;
  }
  std::string problem;
  if (!plausible_peer_address(address, size, &problem)) {
    WEFT_WARN(
        "%s: rejecting peer address: %s (corrupt handle, or peers using different "
        "providers?)",
        device_name_.c_str(), problem.c_str());
    return ncclInvalidArgument;
  }
  // shm maps the region the address names: a stale or forged one crashes it.
  if (!peer_address_usable(provider_name_, address, size, &problem)) {
    WEFT_WARN("%s: cannot use peer %s: %s", device_name_.c_str(),
              address_to_string(address, size).c_str(), problem.c_str());
    return ncclRemoteError;
  }
  fi_addr_t fi_addr = FI_ADDR_NOTAVAIL;
  int inserted;
  {
    std::lock_guard<std::mutex> io_lock(io_mutex_);
    inserted = fi_av_insert(av_.get(), address, 1, &fi_addr, 0, nullptr);
  }
  if (inserted != 1 || fi_addr == FI_ADDR_NOTAVAIL) {
    WEFT_WARN("%s: peer address %s rejected by the address vector (%s)", device_name_.c_str(),
              address_to_string(address, size).c_str(),
              inserted < 0 ? fi_strerror(-inserted) : "not inserted");
    return ncclSystemError;
  }
  address_cache_.emplace(std::move(key), fi_addr);
  *out = fi_addr;
  return ncclSuccess;
}

bool Endpoint::plausible_peer_address(const uint8_t* address, size_t size,
                                      std::string* problem) const {
  switch (address_format_) {
    case FI_ADDR_STR: {
      // "prefix://..." printable text, with the same prefix as ours.
      const char* local = reinterpret_cast<const char*>(local_address_);
      const char* scheme_end = std::strstr(local, "://");
      size_t prefix = scheme_end != nullptr ? static_cast<size_t>(scheme_end - local) + 3 : 0;
      if (size <= prefix || std::memcmp(address, local, prefix) != 0) {
        *problem = "it does not start with the provider's scheme";
        return false;
      }
      for (size_t i = 0; i < size && address[i] != 0; ++i) {
        if (address[i] < 0x20 || address[i] > 0x7e) {
          *problem = "it contains non-printable bytes";
          return false;
        }
      }
      return true;
    }
    case FI_SOCKADDR:
    case FI_SOCKADDR_IN:
    case FI_SOCKADDR_IN6: {
      sa_family_t family = 0;
      sa_family_t local_family = 0;
      if (size >= sizeof(family)) std::memcpy(&family, address, sizeof(family));
      std::memcpy(&local_family, local_address_, sizeof(local_family));
      if (size != local_address_size_ || family != local_family) {
        *problem = "socket address of family " + std::to_string(family) + " and " +
                   std::to_string(size) + " bytes, expected family " +
                   std::to_string(local_family) + " and " + std::to_string(local_address_size_);
        return false;
      }
      return true;
    }
    default:
      if (size != local_address_size_) {
        *problem = std::to_string(size) + " bytes, expected " + std::to_string(local_address_size_);
        return false;
      }
      return true;
  }
}

std::string Endpoint::address_to_string(const uint8_t* address, size_t size) const {
  // fi_av_straddr needs an address the provider understands; bound its work
  // to a local copy so a malformed peer address cannot be over-read.
  uint8_t copy[256] = {};
  std::memcpy(copy, address, std::min(size, sizeof(copy)));
  char text[256] = {};
  size_t length = sizeof(text);
  std::lock_guard<std::mutex> lock(io_mutex_);
  const char* result = fi_av_straddr(av_.get(), copy, text, &length);
  return result != nullptr ? std::string(text) : std::string("<unprintable address>");
}

uint32_t Endpoint::next_id() {
  for (;;) {
    uint32_t id = next_id_.fetch_add(1, std::memory_order_relaxed) & kMaxCommId;
    if (id != 0) return id;
  }
}

void Endpoint::adopt(std::unique_ptr<Comm> orphan) {
  std::lock_guard<std::mutex> lock(mutex_);
  orphans_.push_back(std::move(orphan));
}

}  // namespace weft::ofi
