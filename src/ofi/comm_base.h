// What send and receive comms share: the endpoint, the peer, memory
// registration, error reporting and the close protocol (finish or cancel
// what is in flight, or leave it to the endpoint).
#pragma once

#include <rdma/fabric.h>

#include <memory>
#include <string>

#include "ofi/drain.h"
#include "ofi/endpoint.h"
#include "ofi/memory_region.h"
#include "ofi/ofi_request.h"
#include "weft/log.h"

namespace weft::ofi {

struct CommSetup {
  std::shared_ptr<Endpoint> endpoint;
  fi_addr_t peer = FI_ADDR_UNSPEC;
  std::string peer_name;
  int close_timeout_ms = 2000;
};

// Translates a failed completion into NCCL's error codes, logging the
// operation, device, peer and the provider's text.
ncclResult_t completion_failure(const char* operation, Endpoint& endpoint,
                                const std::string& peer_name, int error, size_t overflow_length,
                                size_t posted_size, const char* text);

template <typename Interface>
class CommBase : public Interface, public RequestOwner {
 public:
  explicit CommBase(CommSetup setup)
      : setup_(std::move(setup)), device_name_(setup_.endpoint->device_name()) {}
  ~CommBase() { deregister_memory(setup_.endpoint.get(), device_name_, control_region_); }

  // Registers the comm's control-message buffers (needed with FI_MR_LOCAL).
  ncclResult_t register_control(void* data, size_t size) {
    return register_memory(*setup_.endpoint, data, size, NCCL_PTR_HOST, &control_region_);
  }
  void* control_descriptor() const { return descriptor_of(control_region_); }

  ncclResult_t reg_mr(void* data, size_t size, int type, void** mhandle) override {
    return register_memory(*setup_.endpoint, data, size, type, mhandle);
  }
  ncclResult_t reg_mr_dmabuf(void* data, size_t size, int, uint64_t, int, void** mhandle) override {
    *mhandle = nullptr;
    WEFT_WARN(
        "%s: dma-buf registration of %zu bytes at %p requested, but this build has no "
        "GPU memory support (ptrSupport=HOST)",
        setup_.endpoint->device_name().c_str(), size, data);
    return ncclInvalidUsage;
  }
  ncclResult_t dereg_mr(void* mhandle) override {
    return deregister_memory(setup_.endpoint.get(), device_name_, mhandle);
  }
  ncclResult_t progress() override { return setup_.endpoint->poll(); }

  void close() override { close_within(setup_.close_timeout_ms); }

  // Finishes or cancels what is in flight for up to `timeout_ms`, then
  // deletes the comm, or leaves it to the endpoint if operations remain.
  void close_within(int timeout_ms) {
    cancel_receives();
    Endpoint& endpoint = *setup_.endpoint;
    if (drain(endpoint, timeout_ms, [this] { return !in_flight(); })) {
      delete this;
      return;
    }
    WEFT_INFO(NCCL_NET,
              "%s: closing a comm with peer %s while operations are still in flight; they are "
              "released when the endpoint closes",
              endpoint.device_name().c_str(), setup_.peer_name.c_str());
    std::shared_ptr<Endpoint> keep = std::move(setup_.endpoint);
    keep->adopt(std::unique_ptr<Comm>(this));
  }

 protected:
  virtual bool in_flight() = 0;
  virtual void cancel_receives() {}

  Endpoint& endpoint() { return *setup_.endpoint; }
  fi_addr_t peer() const { return setup_.peer; }
  const std::string& peer_name() const { return setup_.peer_name; }
  const std::string& device_name() const { return device_name_; }

 private:
  CommSetup setup_;
  std::string device_name_;
  void* control_region_ = nullptr;
};

}  // namespace weft::ofi
