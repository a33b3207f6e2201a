// Posting data operations: one call into the provider each, under the I/O
// lock. EAGAIN goes back to the caller, which polls and retries later.
#include <rdma/fi_atomic.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>
#include <rdma/fi_tagged.h>

#include <string>

#include "ofi/endpoint/endpoint.h"

namespace weft::ofi {

ssize_t Endpoint::send(const void* buffer, size_t size, void* descriptor, fi_addr_t peer,
                       uint64_t tag, OpContext* context) {
  if (weft_matching_) {
    // The compact tag travels as immediate data; the receiver matches it.
    uint32_t compact = 0;
    if (!compact_tag(tag, &compact) || size > pool_slot_size_) return -FI_EINVAL;
    std::lock_guard<std::mutex> lock(domain_.io_mutex());
    return tracked(fi_senddata(ep_.get(), buffer, size, descriptor, compact, peer,
                               &context->provider_context));
  }
  // The size travels as immediate data so the receiver can detect truncation.
  std::lock_guard<std::mutex> lock(domain_.io_mutex());
  return tracked(fi_tsenddata(ep_.get(), buffer, size, descriptor, size, peer, tag,
                              &context->provider_context));
}

ssize_t Endpoint::inject(const void* buffer, size_t size, fi_addr_t peer, uint64_t tag) {
  // The size as CQ data, as send() (under weft's matching, the compact tag).
  return inject_data(buffer, size, size, peer, tag);
}

ssize_t Endpoint::send_data(const void* buffer, size_t size, void* descriptor, uint64_t data,
                            fi_addr_t peer, uint64_t tag, OpContext* context) {
  // Weft's matching owns the CQ data; callers send with a header instead.
  if (weft_matching_) return -FI_EOPNOTSUPP;
  std::lock_guard<std::mutex> lock(domain_.io_mutex());
  return tracked(fi_tsenddata(ep_.get(), buffer, size, descriptor, data, peer, tag,
                              &context->provider_context));
}

ssize_t Endpoint::inject_data(const void* buffer, size_t size, uint64_t data, fi_addr_t peer,
                              uint64_t tag) {
  if (weft_matching_) {
    // The compact tag takes the CQ data's place: only control messages and
    // messages that start with a header may come here.
    uint32_t compact = 0;
    if (!compact_tag(tag, &compact) || size > pool_slot_size_) return -FI_EINVAL;
    data = compact;
  }
  std::lock_guard<std::mutex> lock(domain_.io_mutex());
  if (test_aids_ && test_aids_->held_injects.active()) [[unlikely]] {
    if (test_aids_->held_injects.hold(buffer, size, data, peer, tag)) return 0;
  }
  return inject_now(buffer, size, data, peer, tag);
}

ssize_t Endpoint::inject_now(const void* buffer, size_t size, uint64_t data, fi_addr_t peer,
                             uint64_t tag) {
  if (weft_matching_) return fi_injectdata(ep_.get(), buffer, size, data, peer);
  return fi_tinjectdata(ep_.get(), buffer, size, data, peer, tag);
}

ssize_t Endpoint::receive(void* buffer, size_t size, void* descriptor, uint64_t tag,
                          OpContext* context) {
  std::lock_guard<std::mutex> lock(domain_.io_mutex());
  if (pooled_) {
    // Completed by a later poll(), also when a held message matches now.
    int released = -1;
    matcher_->post(tag, buffer, size, context, &released);
    if (released >= 0) return_pool_slot(released);
    return 0;
  }
  return fi_trecv(ep_.get(), buffer, size, descriptor, FI_ADDR_UNSPEC, tag, 0,
                  &context->provider_context);
}

void Endpoint::cancel(OpContext* context) {
  std::lock_guard<std::mutex> lock(domain_.io_mutex());
  if (pooled_) {
    // Not found: it matched already and its completion is on its way.
    matcher_->cancel(context);
    return;
  }
  fi_cancel(&ep_->fid, &context->provider_context);
}

ssize_t Endpoint::send_with_header(const void* header, size_t header_size, void* header_descriptor,
                                   const void* data, size_t size, void* data_descriptor,
                                   uint64_t cq_data, fi_addr_t peer, uint64_t tag,
                                   OpContext* context) {
  iovec iov[2] = {{const_cast<void*>(header), header_size}, {const_cast<void*>(data), size}};
  void* descriptors[2] = {header_descriptor, data_descriptor};
  if (weft_matching_) {
    uint32_t compact = 0;
    if (!compact_tag(tag, &compact) || header_size + size > pool_slot_size_) return -FI_EINVAL;
    fi_msg message{};
    message.msg_iov = iov;
    message.desc = descriptors;
    message.iov_count = size > 0 ? 2 : 1;
    message.addr = peer;
    message.context = &context->provider_context;
    message.data = compact;  // in place of cq_data: the receiver reads the header
    std::lock_guard<std::mutex> lock(domain_.io_mutex());
    return tracked(fi_sendmsg(ep_.get(), &message, FI_REMOTE_CQ_DATA | FI_COMPLETION));
  }
  fi_msg_tagged message{};
  message.msg_iov = iov;
  message.desc = descriptors;
  message.iov_count = size > 0 ? 2 : 1;
  message.addr = peer;
  message.tag = tag;
  message.context = &context->provider_context;
  message.data = cq_data;
  std::lock_guard<std::mutex> lock(domain_.io_mutex());
  return tracked(fi_tsendmsg(ep_.get(), &message, FI_REMOTE_CQ_DATA | FI_COMPLETION));
}

ssize_t Endpoint::write(const void* buffer, size_t size, void* descriptor, fi_addr_t peer,
                        uint64_t remote_address, uint64_t key, uint32_t immediate,
                        OpContext* context) {
  std::lock_guard<std::mutex> lock(domain_.io_mutex());
  return tracked(fi_writedata(ep_.get(), buffer, size, descriptor, immediate, peer, remote_address,
                              key, &context->provider_context));
}

ssize_t Endpoint::write_self(const void* buffer, size_t size, void* descriptor, const void* target,
                             const Registration& registration, OpContext* context) {
  uint64_t remote = remote_address(target, registration);
  std::lock_guard<std::mutex> lock(domain_.io_mutex());
  return tracked(fi_write(ep_.get(), buffer, size, descriptor, self_, remote, registration.key,
                          &context->provider_context));
}

ssize_t Endpoint::flush_read(const void* data, const Registration& registration,
                             OpContext* context) {
  uint64_t remote = remote_address(data, registration);
  std::lock_guard<std::mutex> lock(domain_.io_mutex());
  return tracked(fi_read(ep_.get(), flush_buffer_, 1, flush_descriptor_, self_, remote,
                         registration.key, &context->provider_context));
}

ssize_t Endpoint::rma_write(const void* buffer, size_t size, void* descriptor, fi_addr_t peer,
                            uint64_t remote_address, uint64_t key, OpContext* context) {
  iovec iov{const_cast<void*>(buffer), size};
  fi_rma_iov remote{remote_address, size, key};
  fi_msg_rma message{};
  message.msg_iov = &iov;
  message.desc = &descriptor;
  message.iov_count = 1;
  message.addr = peer;
  message.rma_iov = &remote;
  message.rma_iov_count = 1;
  message.context = &context->provider_context;
  std::lock_guard<std::mutex> lock(domain_.io_mutex());
  return fi_writemsg(ep_.get(), &message, one_sided_flags_);
}

ssize_t Endpoint::rma_read(void* buffer, size_t size, void* descriptor, fi_addr_t peer,
                           uint64_t remote_address, uint64_t key, OpContext* context) {
  std::lock_guard<std::mutex> lock(domain_.io_mutex());
  return fi_read(ep_.get(), buffer, size, descriptor, peer, remote_address, key,
                 &context->provider_context);
}

ssize_t Endpoint::atomic_add(const uint64_t* operand, void* descriptor, fi_addr_t peer,
                             uint64_t remote_address, uint64_t key, OpContext* context) {
  fi_ioc source{const_cast<uint64_t*>(operand), 1};
  fi_rma_ioc remote{remote_address, 1, key};
  fi_msg_atomic message{};
  message.msg_iov = &source;
  message.desc = &descriptor;
  message.iov_count = 1;
  message.addr = peer;
  message.rma_iov = &remote;
  message.rma_iov_count = 1;
  message.datatype = FI_UINT64;
  message.op = FI_SUM;
  message.context = &context->provider_context;
  std::lock_guard<std::mutex> lock(domain_.io_mutex());
  return fi_atomicmsg(ep_.get(), &message, one_sided_flags_);
}

bool Endpoint::atomic_add_supported(std::string* why) const {
  fi_atomic_attr attr{};
  std::lock_guard<std::mutex> lock(domain_.io_mutex());
  int rc = fi_query_atomic(domain_.get(), FI_UINT64, FI_SUM, &attr, 0);
  if (rc == 0 && attr.count >= 1) return true;
  *why = "provider " + provider_name_ + " does not add 64-bit words remotely (fi_query_atomic: " +
         (rc == 0 ? std::string("count 0") : std::string(fi_strerror(-rc))) + ")";
  return false;
}

uint64_t Endpoint::remote_address(const void* data, const Registration& registration) const {
  auto address = reinterpret_cast<uintptr_t>(data);
  return (domain_.mr_mode() & FI_MR_VIRT_ADDR) != 0 ? address : address - registration.start;
}

}  // namespace weft::ofi
