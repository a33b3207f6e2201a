// Transport: what a test pattern needs from the thing being measured. Two
// implementations: an ncclNet plugin driven through NetClient, and raw
// libfabric tagged messaging (the provider ceiling). Patterns are written
// once against this interface.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace weft::perf {

class Bootstrap;
struct Options;

enum class Direction { send, recv };

class Transport {
 public:
  virtual ~Transport() = default;

  // Key/value facts for the report header (plugin path, ABI, device...).
  virtual std::vector<std::pair<std::string, std::string>> describe() const = 0;
  // Largest message the transport accepts.
  virtual size_t max_message_bytes() const = 0;

  // Sets up one send and one receive channel with the peer.
  virtual void connect(Bootstrap& boot) = 0;

  // Returns an opaque handle for post_*; the region is used for `dir` only.
  virtual void* register_memory(Direction dir, void* data, size_t size) = 0;
  virtual void deregister_memory(Direction dir, void* handle) noexcept = 0;

  // Hot path. nullptr: no resources right now, call again later (after
  // testing outstanding requests). Errors throw PerfError.
  virtual void* post_send(void* data, size_t size, void* mr) = 0;
  virtual void* post_recv(void* data, size_t size, void* mr) = 0;
  // True once complete (the request is then released); *size = bytes moved.
  virtual bool test(void* request, size_t* size) = 0;
};

// A registration released on scope exit (before the transport closes).
class MemoryRegion {
 public:
  MemoryRegion() = default;
  MemoryRegion(Transport& t, Direction dir, void* data, size_t size)
      : transport_(&t), dir_(dir), handle_(t.register_memory(dir, data, size)) {}
  MemoryRegion(MemoryRegion&& o) noexcept
      : transport_(std::exchange(o.transport_, nullptr)), dir_(o.dir_), handle_(o.handle_) {}
  MemoryRegion& operator=(MemoryRegion&&) = delete;
  MemoryRegion(const MemoryRegion&) = delete;
  ~MemoryRegion() {
    if (transport_ != nullptr) transport_->deregister_memory(dir_, handle_);
  }
  void* handle() const { return handle_; }

 private:
  Transport* transport_ = nullptr;
  Direction dir_ = Direction::send;
  void* handle_ = nullptr;
};

std::unique_ptr<Transport> make_plugin_transport(const Options& opts);
std::unique_ptr<Transport> make_raw_ofi_transport(const Options& opts);

}  // namespace weft::perf
