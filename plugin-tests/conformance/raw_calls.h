// Direct calls into the plugin's versioned function table, for arguments
// NetClient never passes: NULL device-handle pointers, NULL sizes in test(),
// NULL phandles, a pre-set *request sentinel, finalize(NULL).
#pragma once

#include <cstddef>

#include "weft_client/net_client.h"

namespace weft::ft {

// Calls f with the one non-null const ncclNet_vN_t* (all f overloads must
// return the same type).
template <class F>
auto with_table(const NetClient& c, F&& f) {
  switch (c.abi_version()) {
    case 6:
      return f(c.v6());
    case 7:
      return f(c.v7());
    case 8:
      return f(c.v8());
    case 9:
      return f(c.v9());
    case 10:
      return f(c.v10());
    case 11:
      return f(c.v11());
    default:
      return f(c.v12());
  }
}

// connect/accept with a NULL device-handle pointer (v7+; v6 has none).
ncclResult_t raw_connect_null_dev(NetClient& c, int dev, void* handle, void** send_comm);
ncclResult_t raw_accept_null_dev(NetClient& c, void* listen_comm, void** recv_comm);
// test() with sizes == NULL.
ncclResult_t raw_test_null_sizes(NetClient& c, void* req, int* done);
// isend/irecv with NULL phandle(s) (v10+); on older versions the plain call.
ncclResult_t raw_isend_null_phandle(NetClient& c, void* comm, void* data, size_t size, int tag,
                                    void* mh, void** req);
ncclResult_t raw_irecv_null_phandles(NetClient& c, void* comm, int n, void** data, size_t* sizes,
                                     int* tags, void** mhs, void** req);
// finalize(NULL), v11+.
ncclResult_t raw_finalize_null(NetClient& c);

}  // namespace weft::ft
