#include "ofi/discovery/gpu_support.h"

#include <rdma/fi_errno.h>
#include <unistd.h>

#include <cstring>

#include "core/cuda/cuda_driver.h"
#include "ofi/discovery/provider_discovery.h"
#include "ofi/fabric/endpoint_options.h"
#include "ofi/fabric/fabric_ptr.h"
#include "weft/log.h"

namespace weft::ofi {
namespace {

constexpr size_t kProbeBytes = 2 << 20;  // one large GPU page

// Registers a real device buffer (and a dma-buf of it) on a scratch domain.
void probe(const fi_info* info, const cuda::Driver& driver, bool try_dmabuf, GpuSupport* support) {
  ScratchDomain scratch;
  if (!open_scratch_domain(info, &scratch, &support->off_reason)) return;
  fid_domain* domain = scratch.domain.get();
  void* buffer = nullptr;
  std::string error;
  if (!driver.alloc(kProbeBytes, 0, &buffer, &error)) {
    support->off_reason = "allocating a probe buffer on GPU 0 failed: " + error;
    return;
  }
  iovec iov{buffer, kProbeBytes};
  fi_mr_attr attr{};
  attr.mr_iov = &iov;
  attr.iov_count = 1;
  attr.access = FI_SEND | FI_RECV;
  attr.requested_key = 1;
  attr.iface = FI_HMEM_CUDA;
  attr.device.cuda = 0;
  fid_mr* mr = nullptr;
  int rc = fi_mr_regattr(domain, &attr, 0, &mr);
  if (rc == 0) {
    FabricPtr<fid_mr> close(mr);
    support->cuda = true;
  } else {
    support->off_reason = std::string("registering GPU memory with provider ") +
                          info->fabric_attr->prov_name + " failed: " + fi_strerror(-rc) +
                          " (no GPUDirect RDMA for this GPU and NIC?)";
  }
#ifdef FI_MR_DMABUF
  int fd = -1;
  if (support->cuda && try_dmabuf && driver.export_dmabuf(buffer, kProbeBytes, &fd, &error)) {
    fi_mr_dmabuf dmabuf{};
    dmabuf.fd = fd;
    dmabuf.len = kProbeBytes;
    dmabuf.base_addr = buffer;
    attr.dmabuf = &dmabuf;
    attr.requested_key = 2;
    mr = nullptr;
    if (fi_mr_regattr(domain, &attr, FI_MR_DMABUF, &mr) == 0) {
      FabricPtr<fid_mr> close(mr);
      support->dmabuf = true;
    }
    close(fd);
  }
#else
  (void)try_dmabuf;
#endif
  driver.free(buffer, &error);
  // EFA's own settings (efa_settings.h) include this one.
  if (support->cuda && !is_efa_provider(info->fabric_attr->prov_name)) {
    fid_ep* ep = nullptr;
    if (int rc = fi_endpoint(domain, const_cast<fi_info*>(info), &ep, nullptr); rc != 0) {
      support->cuda = support->dmabuf = false;
      support->off_reason = std::string("fi_endpoint failed: ") + fi_strerror(-rc);
      return;
    }
    FabricPtr<fid_ep> endpoint(ep);
    FabricOptionCalls calls(ep);
    if (!forbid_cuda_calls(calls, info->fabric_attr->prov_name, &support->off_reason)) {
      support->cuda = support->dmabuf = false;
    }
  }
}

}  // namespace

GpuSupport enable_gpu_memory(DiscoveredDevice* device, const cuda::Driver* driver,
                             const Params& params) {
  GpuSupport support;
  const std::string& name = device->properties.name;
  if (driver == nullptr) {
    support.off_reason = params.gpu == "off"
                             ? "GPU memory support is off (WEFT_GPU=off)"
                             : "no usable CUDA driver (" + params.cuda_lib + "), see the log";
    return support;
  }
  InfoPtr hmem =
      find_variant(device->info.get(), FI_HMEM | FI_RMA | FI_READ | FI_REMOTE_READ, FI_MR_HMEM);
  if (!hmem) hmem = find_variant(device->info.get(), FI_HMEM, FI_MR_HMEM);
  if (!hmem) {
    support.off_reason = std::string("libfabric provider ") + device->info->fabric_attr->prov_name +
                         " offers no FI_HMEM here (this libfabric was built without CUDA "
                         "support, or the provider cannot reach GPU memory)";
    WEFT_INFO(NCCL_INIT, "%s: host memory only: %s", name.c_str(), support.off_reason.c_str());
    return support;
  }
  probe(hmem.get(), *driver, params.dmabuf && driver->dmabuf_supported(0), &support);
  if (!support.cuda) {
    WEFT_INFO(NCCL_INIT, "%s: host memory only: %s", name.c_str(), support.off_reason.c_str());
    return support;
  }
  bool has_rma = (hmem->caps & FI_RMA) != 0;
  support.flush =
      choose_flush(params.gdr_flush, has_rma, driver->has_flush() && driver->gdr_supported(0));
  device->info = std::move(hmem);
  device->properties.ptr_support =
      NCCL_PTR_HOST | NCCL_PTR_CUDA | (support.dmabuf ? NCCL_PTR_DMABUF : 0);
  static const char* const flush_names[] = {"none", "fi_read", "cuFlushGPUDirectRDMAWrites"};
  WEFT_INFO(NCCL_INIT, "%s: GPU memory through FI_HMEM (CUDA%s), flush: %s", name.c_str(),
            support.dmabuf ? ", dma-buf" : "", flush_names[static_cast<int>(support.flush)]);
  return support;
}

}  // namespace weft::ofi
