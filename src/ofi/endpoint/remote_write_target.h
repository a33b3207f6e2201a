// Where the immediate data of a peer's RDMA write into this process goes
// (the RDMA protocol's receive side). The endpoint finds the target from the
// immediate's upper 16 bits, an index handed out by attach_write_target.
#pragma once

#include <cstddef>
#include <cstdint>

namespace weft::ofi {

// Runs on whichever thread polls, under the endpoint's I/O lock: it must not
// call back into the endpoint.
class RemoteWriteTarget {
 public:
  virtual void on_remote_write(uint32_t immediate, size_t length) = 0;

 protected:
  ~RemoteWriteTarget() = default;
};

}  // namespace weft::ofi
