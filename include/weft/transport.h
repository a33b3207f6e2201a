// weft's one internal interface, shaped after ncclNet v12. The exported
// ncclNetPlugin_v6..v12 tables are thin adapters onto it (src/abi/).
//
// Ownership: the ABI layer hands out raw pointers to these objects as
// NCCL's opaque comm/request/mhandle pointers and deletes comms through
// close_*(). Requests are owned by their comm and recycled after test()
// reports completion.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "nccl/types.h"

namespace weft {

struct Params;

constexpr int kMaxRecvs = 8;
constexpr int kMaxRequests = NCCL_NET_MAX_REQUESTS;
constexpr size_t kHandleSize = NCCL_NET_HANDLE_MAXSIZE;

struct DeviceProperties {
  std::string name;
  std::string pci_path;  // empty: not a PCI device
  uint64_t guid = 0;
  int ptr_support = NCCL_PTR_HOST;
  int speed_mbps = 0;
  int port = 0;
  float latency_us = 0;
  int max_comms = 0;
  int max_recvs = kMaxRecvs;
  size_t max_p2p_bytes = 0;
  bool reg_is_global = false;
  bool force_flush = false;
  // NCCL devices a virtual device (makeVDevice) was made of; empty: itself.
  std::vector<int> virtual_of;
  int rail_id = -1;  // v12: -1 unknown
  int plane_id = -1;
};

struct CommConfig {
  int traffic_class = -1;  // -1: undefined
};

// What NCCL says the next connections of one communicator will be
// (setNetAttr, net v11+): at most `peers` peers with `flows` comms each,
// per direction; -1 where NCCL left it undefined.
struct ConnectionHints {
  int send_peers = -1;
  int send_flows = -1;
  int recv_peers = -1;
  int recv_flows = -1;
};

// Events NCCL's profiler started for one request (src/core/net_events.h):
// one per message of it, and for a send one per queue pair's or rail's
// share of it (recorded by the transport as it posts them).
struct NetEventHandles {
  static constexpr int kMaxEvents = 8;  // NCCL's example profiler keeps 8 per proxy step
  int count = 0;
  void* handles[kMaxEvents] = {};
  // Its completion may be seen by another thread polling the transport
  // while the send's events start: handle and done are atomics.
  struct Share {
    uint32_t lane = 0;    // queue pair number (verbs) or rail index (libfabric)
    uint32_t length = 0;  // bytes of the message it carries
    std::atomic<void*> handle{nullptr};
    std::atomic<bool> done{false};  // completed (perhaps before its event could start)
  };
  int share_count = 0;
  Share shares[kMaxEvents - 1];
  // The send's parent once its event started: shares recorded later (a
  // grouped receive's other sends posted them) start at once.
  void* send_parent = nullptr;
  int device = 0;
};

class Request {
 public:
  virtual ~Request() = default;
  // sizes: one int per receive of the group (nullptr allowed).
  virtual ncclResult_t test(int* done, int* sizes) = 0;

  // Made on the request's first profiled use and kept with it (requests are
  // pooled): no allocation per message. The ABI layer starts and stops the
  // message events; transports record and finish shares
  // (core/net_events.h).
  std::unique_ptr<NetEventHandles> net_events;
};

enum class CommKind : uint32_t {
  Send = 0x53454e44,
  Recv = 0x52454356,
  Listen = 0x4c49534e,
  Rma = 0x524d4143,        // one-sided collective comm (one_sided.h)
  RmaListen = 0x524c534e,  // its listener
};

// Common base of everything NCCL holds as a comm pointer, so that a pointer
// of the wrong kind is reported instead of misused.
class Comm {
 public:
  explicit Comm(CommKind kind) : kind_(kind) {}
  virtual ~Comm() = default;
  CommKind kind() const { return kind_; }
  // The device index NCCL named at listen or connect (profiler events).
  int nccl_device = -1;
  // Ends the comm. Operations still in flight are cancelled or waited for;
  // a transport may keep their memory until its endpoint closes.
  virtual void close() { delete this; }

 private:
  CommKind kind_;
};

class DataComm : public Comm {
 public:
  using Comm::Comm;
  virtual ncclResult_t reg_mr(void* data, size_t size, int type, void** mhandle) = 0;
  virtual ncclResult_t reg_mr_dmabuf(void* data, size_t size, int type, uint64_t offset, int fd,
                                     void** mhandle) = 0;
  virtual ncclResult_t dereg_mr(void* mhandle) = 0;
};

class SendComm : public DataComm {
 public:
  SendComm() : DataComm(CommKind::Send) {}
  virtual ncclResult_t isend(void* data, size_t size, int tag, void* mhandle,
                             Request** request) = 0;
};

class RecvComm : public DataComm {
 public:
  RecvComm() : DataComm(CommKind::Recv) {}
  virtual ncclResult_t irecv(int n, void** data, const size_t* sizes, const int* tags,
                             void** mhandles, Request** request) = 0;
  virtual ncclResult_t iflush(int n, void** data, const int* sizes, void** mhandles,
                              Request** request) = 0;
};

class ListenComm : public Comm {
 public:
  ListenComm() : Comm(CommKind::Listen) {}
  // *recv_comm stays nullptr until a peer has connected.
  virtual ncclResult_t accept(RecvComm** recv_comm) = 0;
};

class OneSidedTransport;  // weft/one_sided.h

class Transport {
 public:
  virtual ~Transport() = default;
  virtual const char* name() const = 0;
  virtual int device_count() const = 0;
  virtual ncclResult_t properties(int dev, DeviceProperties* props) const = 0;
  // NCCL's makeVDevice: a new device (index in *dev) over existing ones.
  virtual ncclResult_t make_virtual_device(const std::vector<int>& /*devs*/, int* /*dev*/) {
    return ncclInvalidUsage;
  }
  // handle: kHandleSize bytes, self-contained.
  virtual ncclResult_t listen(int dev, void* handle, ListenComm** listen_comm) = 0;
  // Non-blocking: *send_comm stays nullptr until connected; call again with
  // the same handle buffer.
  virtual ncclResult_t connect(int dev, const CommConfig& config, void* handle,
                               SendComm** send_comm) = 0;

  // A warning when the connections `hints` announce would not fit what
  // this transport's devices have left (empty: they fit, or nothing it
  // holds per connection runs out).
  virtual std::string connection_budget_problem(const ConnectionHints&) { return ""; }

  // NCCL's optional tables, each an interface of its own that a transport
  // implements or not (null: it offers none). NCCL asks a table's
  // `devices` first; weft then answers 0 and says why.
  virtual OneSidedTransport* one_sided() { return nullptr; }
};

// A transport's answer to WEFT_TRANSPORT=auto: used on this node or not,
// and why (abi/transport_table.h logs it as "candidate transport NAME
// [LIBRARY]: used|not used: REASON").
struct AutoChoice {
  bool use = false;
  std::string reason;
  // When finding out already opened it (the verbs ports it discovered).
  std::unique_ptr<Transport> opened;
};

}  // namespace weft
