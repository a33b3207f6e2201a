#include "raw_calls.h"

#include <type_traits>
#include <vector>

namespace weft::ft {
namespace {

template <class T, class U>
constexpr bool is = std::is_same_v<std::remove_cv_t<std::remove_pointer_t<T>>, U>;

template <class T>
constexpr bool has_ctx = is<T, ncclNet_v11_t> || is<T, ncclNet_v12_t>;

template <class T>
constexpr bool has_phandles = is<T, ncclNet_v10_t> || has_ctx<T>;

template <class T>
constexpr bool int_sizes = is<T, ncclNet_v6_t> || is<T, ncclNet_v7_t> || is<T, ncclNet_v8_t>;

}  // namespace

ncclResult_t raw_connect_null_dev(NetClient& c, int dev, void* handle, void** send_comm) {
  return with_table(c, [&](auto* t) -> ncclResult_t {
    using T = decltype(t);
    if constexpr (is<T, ncclNet_v6_t>) {
      return t->connect(dev, handle, send_comm);
    } else if constexpr (is<T, ncclNet_v10_t>) {
      ncclNetCommConfig_v10_t cfg{-1};
      return t->connect(dev, &cfg, handle, send_comm, nullptr);
    } else if constexpr (has_ctx<T>) {
      return t->connect(c.context(), dev, handle, send_comm, nullptr);
    } else {
      return t->connect(dev, handle, send_comm, nullptr);
    }
  });
}

ncclResult_t raw_accept_null_dev(NetClient& c, void* listen_comm, void** recv_comm) {
  return with_table(c, [&](auto* t) -> ncclResult_t {
    using T = decltype(t);
    if constexpr (is<T, ncclNet_v6_t>) {
      return t->accept(listen_comm, recv_comm);
    } else {
      return t->accept(listen_comm, recv_comm, nullptr);
    }
  });
}

ncclResult_t raw_test_null_sizes(NetClient& c, void* req, int* done) {
  return with_table(c, [&](auto* t) -> ncclResult_t { return t->test(req, done, nullptr); });
}

ncclResult_t raw_isend_null_phandle(NetClient& c, void* comm, void* data, size_t size, int tag,
                                    void* mh, void** req) {
  return with_table(c, [&](auto* t) -> ncclResult_t {
    using T = decltype(t);
    if constexpr (has_phandles<T>) {
      return t->isend(comm, data, size, tag, mh, nullptr, req);
    } else if constexpr (int_sizes<T>) {
      return t->isend(comm, data, static_cast<int>(size), tag, mh, req);
    } else {
      return t->isend(comm, data, size, tag, mh, req);
    }
  });
}

ncclResult_t raw_irecv_null_phandles(NetClient& c, void* comm, int n, void** data, size_t* sizes,
                                     int* tags, void** mhs, void** req) {
  return with_table(c, [&](auto* t) -> ncclResult_t {
    using T = decltype(t);
    if constexpr (has_phandles<T>) {
      return t->irecv(comm, n, data, sizes, tags, mhs, nullptr, req);
    } else if constexpr (int_sizes<T>) {
      std::vector<int> isz(static_cast<size_t>(n));
      for (int i = 0; i < n; ++i) isz[static_cast<size_t>(i)] = static_cast<int>(sizes[i]);
      return t->irecv(comm, n, data, isz.data(), tags, mhs, req);
    } else {
      return t->irecv(comm, n, data, sizes, tags, mhs, req);
    }
  });
}

ncclResult_t raw_finalize_null(NetClient& c) {
  return with_table(c, [&](auto* t) -> ncclResult_t {
    using T = decltype(t);
    if constexpr (has_ctx<T>) {
      return t->finalize(nullptr);
    } else {
      return ncclInvalidUsage;
    }
  });
}

}  // namespace weft::ft
