// One RDM endpoint per device and process, shared by every comm of that
// device: fabric, domain, address vector, completion queue. Comms hold it
// through shared_ptr; it closes when the last comm (and the transport) let
// go of it.
#pragma once

#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "nccl/types.h"
#include "ofi/completion.h"
#include "ofi/fabric_ptr.h"
#include "weft/transport.h"

namespace weft::ofi {

struct EndpointOptions {
  int cq_read_count = 16;
  int cq_size = 8192;
};

class Endpoint {
 public:
  // Opens everything for `info` (one device). Logs and returns an error on
  // failure, naming the device and the call that failed.
  static ncclResult_t open(const fi_info* info, const std::string& device_name,
                           const EndpointOptions& options, std::shared_ptr<Endpoint>* out);
  ~Endpoint();
  Endpoint(const Endpoint&) = delete;
  Endpoint& operator=(const Endpoint&) = delete;

  // Reads a batch of completions and dispatches them. Returns an error only
  // when the completion queue itself fails.
  ncclResult_t poll();

  // Address vector entry for a peer's raw address; cached so reconnecting to
  // the same peer does not grow the AV.
  ncclResult_t insert_address(const uint8_t* address, size_t size, fi_addr_t* out);
  std::string address_to_string(const uint8_t* address, size_t size) const;
  // Cheap sanity check of a peer's address before the provider sees it.
  bool plausible_peer_address(const uint8_t* address, size_t size, std::string* problem) const;

  // Ids for listeners and comms, unique on this endpoint, in 1..2^31-1.
  uint32_t next_id();

  // Keeps a closed comm whose operations could not be finished or cancelled
  // in time: its memory must stay valid until the endpoint stops producing
  // completions.
  void adopt(std::unique_ptr<Comm> orphan);

  // Data operations. The domain is opened FI_THREAD_DOMAIN and every call
  // into it goes through io_mutex_: one uncontended lock is cheaper than
  // the provider's own thread-safe mode, and some providers (rxd) deadlock
  // in that mode.
  ssize_t send(const void* buffer, size_t size, void* descriptor, fi_addr_t peer, uint64_t tag,
               OpContext* context);
  ssize_t inject(const void* buffer, size_t size, fi_addr_t peer, uint64_t tag);
  ssize_t receive(void* buffer, size_t size, void* descriptor, uint64_t tag, OpContext* context);
  void cancel(OpContext* context);
  int register_region(void* data, size_t size, fid_mr** mr);
  int close_region(fid_mr* mr);
  const uint8_t* local_address() const { return local_address_; }
  size_t local_address_size() const { return local_address_size_; }
  const std::string& device_name() const { return device_name_; }
  const std::string& provider_name() const { return provider_name_; }
  // Sends up to this size complete on return (fi_tinject), with no completion.
  size_t inject_size() const { return inject_size_; }
  bool needs_local_mr() const { return (mr_mode_ & FI_MR_LOCAL) != 0; }
  // After a truncated or failed connection some providers cannot use the
  // connection again (tcp loses its place in the byte stream): new comms on
  // this device then get a fresh endpoint, and so a fresh connection.
  void mark_broken() { broken_.store(true, std::memory_order_relaxed); }
  bool broken() const { return broken_.load(std::memory_order_relaxed); }

 private:
  Endpoint() = default;

  FabricPtr<fid_fabric> fabric_;
  FabricPtr<fid_domain> domain_;
  FabricPtr<fid_av> av_;
  FabricPtr<fid_cq> cq_;
  FabricPtr<fid_ep> ep_;
  std::string device_name_;
  std::string provider_name_;
  uint64_t mr_mode_ = 0;
  size_t inject_size_ = 0;
  uint32_t address_format_ = FI_FORMAT_UNSPEC;
  int cq_read_count_ = 16;
  uint8_t local_address_[128] = {};
  size_t local_address_size_ = 0;
  std::atomic<uint32_t> next_id_{1};
  std::atomic<uint64_t> mr_key_{1};
  std::atomic<bool> cq_failed_{false};
  std::atomic<bool> broken_{false};

  mutable std::mutex io_mutex_;  // serializes every call into the domain, endpoint, AV and CQ
  std::mutex mutex_;             // guards the address cache and the orphans
  std::unordered_map<std::string, fi_addr_t> address_cache_;
  std::vector<std::unique_ptr<Comm>> orphans_;
};

}  // namespace weft::ofi
