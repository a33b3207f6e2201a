// Generic adapters from each ncclNet version's calling convention onto the
// version-independent entry points. One template per concept, instantiated
// per version: size types, where config and ctx come from, phandles.
#pragma once

#include <climits>
#include <cstring>
#include <type_traits>

#include "abi/net/entry_points.h"
#include "abi/string_pool.h"
#include "weft/log.h"

namespace weft::abi {

// Fills any version's properties struct from the internal properties.
// `device_type`: what NCCL runs on the device's comms (a host plugin, or a
// GIN proxy for the one-sided tables).
template <typename Props>
void fill_properties(int dev, const DeviceProperties& in, Props* out,
                     int device_type = NCCL_NET_DEVICE_HOST) {
  std::memset(out, 0, sizeof(*out));
  out->name = intern_string(in.name);
  out->pciPath = in.pci_path.empty() ? nullptr : intern_string(in.pci_path);
  out->guid = in.guid;
  out->ptrSupport = in.ptr_support;
  out->speed = in.speed_mbps;
  out->port = in.port;
  out->latency = in.latency_us;
  out->maxComms = in.max_comms;
  out->maxRecvs = in.max_recvs;
  if constexpr (requires { out->regIsGlobal; }) out->regIsGlobal = in.reg_is_global ? 1 : 0;
  if constexpr (requires { out->forceFlush; }) out->forceFlush = in.force_flush ? 1 : 0;
  if constexpr (requires { out->netDeviceType; }) {
    out->netDeviceType = static_cast<decltype(out->netDeviceType)>(device_type);
    out->netDeviceVersion = 0;
  }
  if constexpr (requires { out->vProps; }) {
    constexpr size_t kMaxDevs = sizeof(out->vProps.devs) / sizeof(out->vProps.devs[0]);
    if (in.virtual_of.empty() || in.virtual_of.size() > kMaxDevs) {
      out->vProps.ndevs = 1;
      out->vProps.devs[0] = dev;
    } else {
      out->vProps.ndevs = static_cast<int>(in.virtual_of.size());
      for (size_t i = 0; i < in.virtual_of.size(); ++i) out->vProps.devs[i] = in.virtual_of[i];
    }
  }
  if constexpr (requires { out->maxP2pBytes; }) {
    out->maxP2pBytes = in.max_p2p_bytes;
    out->maxCollBytes = in.max_p2p_bytes;
  } else {
    // Versions with int sizes cannot describe more than INT_MAX per message;
    // NCCL already splits below that.
  }
  if constexpr (requires { out->maxMultiRequestSize; }) out->maxMultiRequestSize = 1;
  if constexpr (requires { out->railId; }) {
    out->railId = static_cast<int16_t>(in.rail_id);
    out->planeId = static_cast<int16_t>(in.plane_id);
  }
}

template <typename Props, int DeviceType = NCCL_NET_DEVICE_HOST>
ncclResult_t get_properties(int dev, Props* props) {
  if (props == nullptr) return ncclInvalidArgument;
  DeviceProperties internal;
  ncclResult_t result = properties(dev, &internal);
  if (result != ncclSuccess) return result;
  fill_properties(dev, internal, props, DeviceType);
  return ncclSuccess;
}

// A HOST plugin has no device-side comm: NCCL may pass a NULL pointer to it.
template <typename DevHandle>
void clear_device_handle(DevHandle** dev_handle) {
  if (dev_handle != nullptr) *dev_handle = nullptr;
}

// irecv for versions with int sizes: widen on the stack.
inline ncclResult_t irecv_int_sizes(void* comm, int n, void** data, int* sizes, int* tags,
                                    void** mhandles, void** request) {
  if (request != nullptr) *request = nullptr;
  if (n < 1 || n > kMaxRecvs) {
    WEFT_WARN("irecv: %d receives in one group, supported 1..%d", n, kMaxRecvs);
    return ncclInvalidArgument;
  }
  size_t wide[kMaxRecvs];
  for (int i = 0; i < n; ++i) {
    if (sizes != nullptr && sizes[i] < 0) {
      WEFT_WARN("irecv: negative size %d", sizes[i]);
      return ncclInvalidArgument;
    }
    wide[i] = sizes == nullptr ? 0 : static_cast<size_t>(sizes[i]);
  }
  return irecv(comm, n, data, wide, tags, mhandles, request);
}

inline ncclResult_t isend_int_size(void* comm, void* data, int size, int tag, void* mhandle,
                                   void** request) {
  if (size < 0) {
    if (request != nullptr) *request = nullptr;
    WEFT_WARN("isend: negative size %d", size);
    return ncclInvalidArgument;
  }
  return isend(comm, data, static_cast<size_t>(size), tag, mhandle, request);
}

}  // namespace weft::abi
