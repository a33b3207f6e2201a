#include "ofi/endpoint.h"

#include <rdma/fi_cm.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstring>
#include <string>

#include "ofi/completion.h"
#include "weft/log.h"

namespace weft::ofi {
namespace {

constexpr int kMaxBatch = 256;

ncclResult_t fail(const std::string& device, const char* call, int rc) {
  WEFT_WARN("%s: %s failed: %s (%d)", device.c_str(), call, fi_strerror(-rc), rc);
  return ncclSystemError;
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
  if (rc != 0) return fail(device_name, "fi_cq_open", rc);
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
  if (rc != 0) return fail(device_name, "fi_enable", rc);

  size_t address_size = sizeof(endpoint->local_address_);
  rc = fi_getname(&ep->fid, endpoint->local_address_, &address_size);
  if (rc != 0) return fail(device_name, "fi_getname", rc);
  endpoint->local_address_size_ = address_size;

  *out = std::move(endpoint);
  return ncclSuccess;
}

Endpoint::~Endpoint() {
  // Close the endpoint first: after that no completion can reach an orphan.
  ep_.reset();
  orphans_.clear();
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

int Endpoint::register_region(void* data, size_t size, fid_mr** mr) {
  std::lock_guard<std::mutex> lock(io_mutex_);
  return fi_mr_reg(domain_.get(), data, size, FI_SEND | FI_RECV, 0,
                   mr_key_.fetch_add(1, std::memory_order_relaxed), 0, mr, nullptr);
}

int Endpoint::close_region(fid_mr* mr) {
  std::lock_guard<std::mutex> lock(io_mutex_);
  return fi_close(&mr->fid);
}

ncclResult_t Endpoint::poll() {
  fi_cq_tagged_entry entries[kMaxBatch];
  // Completion callbacks run under the lock; they only record results.
  std::lock_guard<std::mutex> lock(io_mutex_);
  ssize_t count = fi_cq_read(cq_.get(), entries, static_cast<size_t>(cq_read_count_));
  if (count > 0) {
    for (ssize_t i = 0; i < count; ++i) {
      auto* op = static_cast<OpContext*>(entries[i].op_context);
      if (op == nullptr || op->target == nullptr) continue;
      const uint64_t* data = (entries[i].flags & FI_REMOTE_CQ_DATA) ? &entries[i].data : nullptr;
      op->target->on_complete(op->slot, entries[i].len, data);
    }
    return ncclSuccess;
  }
  if (count == -FI_EAGAIN) return ncclSuccess;
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
      op->target->on_error(op->slot, error.err, error.olen, detail != nullptr ? detail : "");
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
    uint32_t id = next_id_.fetch_add(1, std::memory_order_relaxed) & 0x7fffffffu;
    if (id != 0) return id;
  }
}

void Endpoint::adopt(std::unique_ptr<Comm> orphan) {
  std::lock_guard<std::mutex> lock(mutex_);
  orphans_.push_back(std::move(orphan));
}

}  // namespace weft::ofi
