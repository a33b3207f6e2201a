#include "ofi/endpoint/connect_inbox.h"

#include <rdma/fi_errno.h>

#include <algorithm>
#include <cstdio>
#include <string>

#include "core/listen_secret.h"
#include "ofi/endpoint/endpoint.h"
#include "ofi/endpoint/tag_layout.h"
#include "ofi/fabric/provider_quirks.h"
#include "weft/log.h"

namespace weft::ofi {

ConnectInbox::ConnectInbox(Endpoint& endpoint) : endpoint_(endpoint) {
  for (int i = 0; i < kMaxReceives; ++i) {
    receives_[i].op.target = this;
    receives_[i].op.slot = static_cast<uint32_t>(i);
  }
}

// The endpoint closed first: none of the receives can complete any more.
ConnectInbox::~ConnectInbox() {
  if (mr_ != nullptr) endpoint_.domain().close_region(mr_);
}

ncclResult_t ConnectInbox::open(uint32_t listener_id, uint64_t secret) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!started_) {
    Registration registration;
    const char* failed_call = nullptr;
    const int rc = endpoint_.register_region(receives_, sizeof(receives_), MemorySource{},
                                             receives_, &registration, &failed_call);
    if (rc != 0) {
      WEFT_WARN("%s: registering the connect-request receives failed in %s: %s",
                endpoint_.device_name().c_str(), failed_call, fi_strerror(-rc));
      return ncclSystemError;
    }
    mr_ = registration.mr;
    descriptor_ = registration.descriptor;
    started_ = true;
  }
  listeners_[listener_id].secret = secret;
  return post_idle();
}

void ConnectInbox::close(uint32_t listener_id) {
  std::lock_guard<std::mutex> lock(mutex_);
  listeners_.erase(listener_id);
  int live = 0;
  for (Receive& receive : receives_) {
    if (!receive.posted || receive.cancelling) continue;
    if (++live <= wanted()) continue;
    // Its completion (cancelled, or a request that matched first) comes
    // through a later poll.
    receive.cancelling = true;
    endpoint_.cancel(&receive.op);
  }
}

int ConnectInbox::posted() const {
  std::lock_guard<std::mutex> lock(mutex_);
  int count = 0;
  for (const Receive& receive : receives_) count += receive.posted ? 1 : 0;
  return count;
}

int ConnectInbox::wanted() const {
  return static_cast<int>(std::min<size_t>(listeners_.size(), kMaxReceives));
}

ncclResult_t ConnectInbox::take(uint32_t listener_id, ConnectRequest* request, bool* got) {
  *got = false;
  std::lock_guard<std::mutex> lock(mutex_);
  ncclResult_t result = handle_arrivals();
  auto found = listeners_.find(listener_id);
  if (found != listeners_.end() && !found->second.waiting.empty()) {
    *request = found->second.waiting.front();
    found->second.waiting.pop_front();
    *got = true;
  }
  return result;
}

ncclResult_t ConnectInbox::handle_arrivals() {
  ncclResult_t result = ncclSuccess;
  for (Receive& receive : receives_) {
    if (!receive.posted || !receive.arrived.load(std::memory_order_acquire)) continue;
    receive.posted = false;
    receive.cancelling = false;
    if (receive.cancelled.load(std::memory_order_relaxed)) continue;
    if (int error = receive.error.load(std::memory_order_relaxed)) {
      // A request larger than any weft sends is the sender's: dropped.
      if (error == kTruncated) {
        dropped_.fetch_add(1, std::memory_order_relaxed);
        WEFT_INFO(NCCL_INIT, "%s: dropping a connect request larger than %zu bytes",
                  endpoint_.device_name().c_str(), kConnectRequestSize);
        continue;
      }
      WEFT_WARN("%s: receiving a connect request failed: %s (%s)", endpoint_.device_name().c_str(),
                fi_strerror(error), receive.error_text);
      result = ncclSystemError;
      continue;
    }
    route(receive);
  }
  ncclResult_t posted = post_idle();
  return result != ncclSuccess ? result : posted;
}

void ConnectInbox::route(const Receive& receive) {
  // Anyone who can reach the endpoint can send here: what is dropped is
  // logged at most once a second (log_refused_connect), never per request.
  const std::string where = endpoint_.device_name() + " connect inbox";
  ConnectRequest request;
  std::string problem;
  if (!decode_connect_request(receive.bytes, receive.length, &request, &problem)) {
    // Not fatal for any listener: a stray or corrupt request is dropped.
    dropped_.fetch_add(1, std::memory_order_relaxed);
    log_refused_connect(where, "a peer", "ignoring a connect request: " + problem);
    return;
  }
  const std::string from = "a peer that names itself " +
                           endpoint_.address_to_string(request.address, request.address_size);
  auto found = listeners_.find(request.listener_id);
  if (found == listeners_.end()) {
    // Closed already (a stale handle) or never opened.
    dropped_.fetch_add(1, std::memory_order_relaxed);
    log_refused_connect(where, from,
                        "it names listener " + std::to_string(request.listener_id) +
                            ", which is not listening (a stale handle?)");
    return;
  }
  const std::string listener =
      endpoint_.device_name() + " listener " + std::to_string(request.listener_id);
  if (!listen_secret_matches(found->second.secret, request.secret)) {
    // Nothing of it is kept and nothing answers it: the sender learns
    // nothing, and the genuine request is taken as before.
    dropped_.fetch_add(1, std::memory_order_relaxed);
    log_refused_connect(listener, from);
    return;
  }
  if (found->second.waiting.size() >= kMaxWaiting) {
    dropped_.fetch_add(1, std::memory_order_relaxed);
    log_refused_connect(listener, from,
                        std::to_string(kMaxWaiting) + " connects with its secret wait already");
    return;
  }
  found->second.waiting.push_back(request);
}

ncclResult_t ConnectInbox::post_idle() {
  int live = 0;
  for (const Receive& receive : receives_) live += receive.posted && !receive.cancelling ? 1 : 0;
  for (Receive& receive : receives_) {
    if (live >= wanted()) break;
    if (receive.posted) continue;
    receive.arrived.store(false, std::memory_order_relaxed);
    receive.cancelled.store(false, std::memory_order_relaxed);
    receive.error.store(0, std::memory_order_relaxed);
    receive.length = 0;
    const ssize_t rc = endpoint_.receive(receive.bytes, sizeof(receive.bytes), descriptor_,
                                         kConnectInboxTag, &receive.op);
    if (rc == -FI_EAGAIN) return still_waiting();  // the next take() tries again
    if (rc != 0) {
      // shm says ENOMEM when its receive queue is full.
      WEFT_WARN("%s: posting a connect-request receive failed: %s%s",
                endpoint_.device_name().c_str(), fi_strerror((int)-rc),
                rc == -FI_ENOMEM ? receive_queue_full_note(endpoint_.provider_name()).c_str() : "");
      return ncclSystemError;
    }
    receive.posted = true;
    ++live;
    unposted_since_.reset();
  }
  return ncclSuccess;
}

// EAGAIN that lasts with no receive posted means the provider's receive
// queue is full (the tagged protocol's data receives): an error, not a wait
// that never ends.
ncclResult_t ConnectInbox::still_waiting() {
  for (const Receive& receive : receives_)
    if (receive.posted && !receive.cancelling) return ncclSuccess;
  constexpr auto kFullFor = std::chrono::seconds(2);
  const auto now = std::chrono::steady_clock::now();
  if (!unposted_since_) unposted_since_ = now;
  if (now - *unposted_since_ < kFullFor) return ncclSuccess;
  WEFT_WARN("%s: no connect-request receive could be posted for %lld s%s",
            endpoint_.device_name().c_str(), static_cast<long long>(kFullFor.count()),
            receive_queue_full_note(endpoint_.provider_name()).c_str());
  return ncclSystemError;
}

void ConnectInbox::on_complete(uint32_t slot, size_t length, const uint64_t*) {
  Receive& receive = receives_[slot];
  receive.length = length;
  receive.arrived.store(true, std::memory_order_release);
}

void ConnectInbox::on_error(uint32_t slot, int error, size_t, const char* text) {
  Receive& receive = receives_[slot];
  if (error == FI_ECANCELED) {
    receive.cancelled.store(true, std::memory_order_relaxed);
  } else {
    std::snprintf(receive.error_text, sizeof(receive.error_text), "%s", text);
    receive.error.store(error, std::memory_order_relaxed);
  }
  receive.length = 0;
  receive.arrived.store(true, std::memory_order_release);
}

}  // namespace weft::ofi
