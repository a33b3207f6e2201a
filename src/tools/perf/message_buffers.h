// Host memory for the messages of one comm: a send arena and a receive arena,
// each page-aligned and registered once for the whole sweep. A size step uses
// `slots(size)` page-aligned slots of each (up to --depth, within
// --buffer-bytes), plus a control page at the end for acknowledgements.
#pragma once

#include <cstddef>
#include <vector>

#include "host_buffer.h"
#include "transport.h"

namespace weft::perf {

struct Options;

class MessageBuffers {
 public:
  // The layout depends only on the options and sizes, so both ranks' arenas
  // match slot for slot (raw RMA writes rely on that).
  MessageBuffers(Transport& transport, int comm, const Options& opts,
                 const std::vector<size_t>& sizes);

  size_t slots(size_t size) const;
  char* send_slot(size_t size, size_t slot) const { return send_.data() + slot * stride(size); }
  char* recv_slot(size_t size, size_t slot) const { return recv_.data() + slot * stride(size); }
  char* send_ctrl() const { return send_.data() + ctrl_offset_; }
  char* recv_ctrl() const { return recv_.data() + ctrl_offset_; }
  void* send_mr() const { return send_mr_.handle(); }
  void* recv_mr() const { return recv_mr_.handle(); }

  // Before a size step (when checking): the send slots get this rank's
  // pattern, the receive slots a poison value.
  void fill_send(int rank, size_t size, size_t nslots) const;
  void poison_recv(size_t size, size_t nslots) const;

  static constexpr size_t kCtrlBytes = 8;

 private:
  static size_t stride(size_t size);
  size_t arena_bytes(const std::vector<size_t>& sizes) const;

  size_t buffer_bytes_;
  size_t depth_;
  size_t ctrl_offset_ = 0;
  HostBuffer send_;
  HostBuffer recv_;
  MemoryRegion send_mr_;
  MemoryRegion recv_mr_;
};

}  // namespace weft::perf
