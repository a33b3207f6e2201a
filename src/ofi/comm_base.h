// What send and receive comms share: the endpoint, the peer, memory
// registration, error reporting and the close protocol (finish or cancel
// what is in flight, or leave it to the endpoint).
#pragma once

#include <rdma/fabric.h>

#include <memory>
#include <string>

#include "core/comm_close.h"
#include "ofi/completion.h"
#include "ofi/endpoint.h"
#include "ofi/memory_region.h"
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
    return register_memory(*setup_.endpoint, data, size, MemorySource{}, &control_region_);
  }
  void* control_descriptor() const { return descriptor_of(control_region_); }
  bool control_registered() const { return control_region_ != nullptr; }

  ncclResult_t reg_mr(void* data, size_t size, int type, void** mhandle) override {
    *mhandle = nullptr;
    MemorySource source;
    ncclResult_t result = classify_memory(*setup_.endpoint, data, size, type, &source);
    if (result != ncclSuccess) return result;
    return register_memory(*setup_.endpoint, data, size, source, mhandle);
  }
  ncclResult_t reg_mr_dmabuf(void* data, size_t size, int type, uint64_t offset, int fd,
                             void** mhandle) override {
    *mhandle = nullptr;
    MemorySource source;
    ncclResult_t result = classify_memory(*setup_.endpoint, data, size, type, &source);
    if (result != ncclSuccess) return result;
    if (fd >= 0 && type == NCCL_PTR_CUDA && setup_.endpoint->dmabuf()) {
      // Used during the call only: NCCL closes the fd when it returns.
      source.dmabuf_fd = fd;
      source.dmabuf_offset = offset;
    }
    return register_memory(*setup_.endpoint, data, size, source, mhandle);
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
    // Held here: if the endpoint adopts this comm, the comm's own reference
    // to it must not be the last.
    std::shared_ptr<Endpoint> endpoint = setup_.endpoint;
    std::string peer = setup_.peer_name;
    if (!finish_close(
            this, *endpoint, *endpoint, timeout_ms, [this] { return !in_flight(); },
            [this] { setup_.endpoint.reset(); })) {
      WEFT_INFO(NCCL_NET,
                "%s: closed a comm with peer %s while operations were still in flight; they are "
                "released when the endpoint closes",
                endpoint->device_name().c_str(), peer.c_str());
    }
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
