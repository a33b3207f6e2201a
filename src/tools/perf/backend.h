// Backend: what a test pattern needs from the thing being measured. Two
// implementations: an ncclNet plugin driven through NetClient, and raw
// libfabric (the provider ceiling). Patterns are written once against this
// interface. (Not weft::Transport, the plugin's own internal interface; the
// report still calls this choice "transport": plugin or raw-ofi.)
//
// A "comm" is one bidirectional channel to the peer (a send comm plus a
// recv comm for a plugin; an endpoint of its own for raw libfabric). Each
// comm is driven by one thread at a time; different comms may be driven by
// different threads at once, as NCCL's proxy threads do.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "errors.h"

namespace weft {
class NetClient;
}

namespace weft::perf {

class Bootstrap;
struct Options;

enum class Direction { send, recv };
// What a registered region is: host memory (NCCL_PTR_HOST) or GPU memory
// (NCCL_PTR_CUDA).
enum class MemoryKind { host, cuda };

using Facts = std::vector<std::pair<std::string, std::string>>;

// Largest receive group weft-perf posts (--group's bound).
inline constexpr int kMaxGroup = 64;
// --idle-comms: comm pairs open beside the ones in use.
inline constexpr int kMaxIdleComms = 100000;

class Backend {
 public:
  virtual ~Backend() = default;

  // Key/value facts for the report header (plugin path, ABI, device...).
  virtual Facts describe() const = 0;
  // Short name for a result line or plot legend, e.g. "weft (tcp;ofi_rxm)".
  virtual std::string label() const = 0;
  // Largest message the backend accepts.
  virtual size_t max_message_bytes() const = 0;
  // Largest receive group (ncclNet maxRecvs); 1 where grouping is unsupported.
  virtual int max_recvs() const = 0;

  // Sets up `comms` channels with the peer.
  virtual void connect(Bootstrap& boot, int comms) = 0;

  // Returns an opaque handle for post_*; the region is used for `dir` on
  // `comm` only. Each comm registers one region per direction for messages
  // (and, with GPU memory, a host one for acknowledgements); the reg test
  // registers and deregisters on (0, send) in a loop.
  virtual void* register_memory(int comm, Direction dir, void* data, size_t size,
                                MemoryKind kind) = 0;
  // GPU memory by dma-buf (ncclNet regMrDmaBuf): `data` lies `offset` bytes
  // into the dma-buf `fd`; the caller closes fd after the call.
  virtual void* register_dmabuf(int, Direction, void*, size_t, uint64_t, int) {
    throw PerfError(label() + ": no dma-buf registration on this transport");
  }
  virtual void deregister_memory(int comm, Direction dir, void* handle) noexcept = 0;
  // Called once after every comm registered its regions (raw RMA mode
  // exchanges receive-region addresses and keys here).
  virtual void exchange_regions(Bootstrap&) {}

  // Hot path. nullptr: no resources right now, call again later (after
  // testing outstanding requests). Errors throw PerfError.
  virtual void* post_send(int comm, void* data, size_t size, int tag, void* mr) = 0;
  // n receives completed as one request (ncclNet grouped irecv), n <= max_recvs().
  virtual void* post_recv(int comm, int n, void** data, size_t* sizes, int* tags, void** mrs) = 0;
  // True once complete (the request is then released); sizes[i] = bytes of
  // receive i (one entry for a send), as ncclNet's test() reports them.
  virtual bool test(int comm, void* request, int* sizes) = 0;
  // After a receive into GPU memory completed (ncclNet iflush): a request to
  // test() to completion, or nullptr when there is nothing to flush.
  virtual void* flush(int, int, void**, int*, void**) { return nullptr; }

  // One-sided (tests put, get, signal): a window of the same size on both
  // ranks, opened by both at once (a collective registration); operations
  // name offsets in the local and the peer's window. The window's first
  // kWindowDataOffset bytes are the backend's (the plugin's signal word).
  virtual void open_window(Bootstrap&, int /*rank*/, char*, size_t) {
    throw PerfError(label() + ": no one-sided operations");
  }
  virtual void close_window() noexcept {}
  // Hot path, nullptr: retry after testing. put: local bytes to the peer;
  // with `signal`, then +1 on the peer's signal count once the data is
  // there. get: the peer's bytes into the local window.
  virtual void* post_put(size_t /*local*/, size_t /*remote*/, size_t /*size*/, bool /*signal*/) {
    return nullptr;
  }
  virtual void* post_get(size_t /*local*/, size_t /*remote*/, size_t /*size*/) { return nullptr; }
  virtual bool test_one_sided(void*) { return true; }
  // Drives progress, then returns the signals that have reached this rank.
  virtual uint64_t signals_arrived() { return 0; }
};

// One-sided windows: where the data area starts (a page, so it stays
// aligned as NCCL's windows are).
inline constexpr size_t kWindowDataOffset = 4096;

// A registration released on scope exit (before the backend closes).
class ScopedRegistration {
 public:
  ScopedRegistration() = default;
  ScopedRegistration(Backend& backend, int comm, Direction dir, void* data, size_t size,
                     MemoryKind kind = MemoryKind::host)
      : backend_(&backend),
        comm_(comm),
        dir_(dir),
        handle_(backend.register_memory(comm, dir, data, size, kind)) {}
  // By dma-buf; fd stays the caller's.
  ScopedRegistration(Backend& backend, int comm, Direction dir, void* data, size_t size,
                     uint64_t offset, int fd)
      : backend_(&backend),
        comm_(comm),
        dir_(dir),
        handle_(backend.register_dmabuf(comm, dir, data, size, offset, fd)) {}
  ScopedRegistration(ScopedRegistration&& o) noexcept
      : backend_(std::exchange(o.backend_, nullptr)),
        comm_(o.comm_),
        dir_(o.dir_),
        handle_(o.handle_) {}
  ScopedRegistration& operator=(ScopedRegistration&& o) noexcept {
    if (this != &o) {
      reset();
      backend_ = std::exchange(o.backend_, nullptr);
      comm_ = o.comm_;
      dir_ = o.dir_;
      handle_ = o.handle_;
    }
    return *this;
  }
  ScopedRegistration(const ScopedRegistration&) = delete;
  ~ScopedRegistration() { reset(); }
  void reset() noexcept {
    if (backend_ != nullptr) backend_->deregister_memory(comm_, dir_, handle_);
    backend_ = nullptr;
  }
  void* handle() const { return handle_; }

 private:
  Backend* backend_ = nullptr;
  int comm_ = 0;
  Direction dir_ = Direction::send;
  void* handle_ = nullptr;
};

std::unique_ptr<Backend> make_plugin_backend(const Options& opts);
// The ncclNet plugin at opts.plugin_path (table opts.abi, 0: the newest),
// initialized, with device opts.dev; throws PerfError naming what failed.
// The two-rank tests' backend and the job runner (job_run.h) start so.
std::unique_ptr<NetClient> open_plugin_device(const Options& opts);
std::unique_ptr<Backend> make_raw_ofi_backend(const Options& opts);

}  // namespace weft::perf
