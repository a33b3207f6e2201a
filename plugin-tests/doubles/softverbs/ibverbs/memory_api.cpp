// Protection domains and memory regions, host and dma-buf.

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <memory>

#include "ibverbs/api.h"
#include "model/context.h"
#include "model/env.h"
#include "model/lifecycle.h"
#include "model/limits.h"
#include "model/memory.h"
#include "model/nic.h"

using namespace softverbs;

SOFTVERBS_API ibv_pd* ibv_alloc_pd(ibv_context* verbs_ctx) {
  Context* context = context_of(verbs_ctx);
  if (context == nullptr) {
    errno = EINVAL;
    return nullptr;
  }
  auto* pd = new Pd();
  pd->handle.owner = pd;
  pd->handle.verbs.context = verbs_ctx;
  pd->handle.verbs.handle = next_handle();
  pd->context = shared_context(context);
  return &pd->handle.verbs;
}

SOFTVERBS_API int ibv_dealloc_pd(ibv_pd* verbs_pd) {
  Pd* pd = owner_of<Pd>(verbs_pd);
  if (pd == nullptr) return EINVAL;
  if (pd->users.load() > 0) return EBUSY;
  delete pd;
  return 0;
}

namespace {

ibv_mr* register_mr(ibv_pd* verbs_pd, void* addr, size_t length, uint64_t iova, int access,
                    void* mapping, size_t mapping_length, char* base) {
  Pd* pd = owner_of<Pd>(verbs_pd);
  // Remote write (or atomic) without local write is refused by hardware.
  bool bad_access = (access & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC)) != 0 &&
                    (access & IBV_ACCESS_LOCAL_WRITE) == 0;
  if (pd == nullptr || length == 0 || bad_access) {
    if (mapping != nullptr) munmap(mapping, mapping_length);
    errno = EINVAL;
    return nullptr;
  }
  if (!take_object(LimitedObject::kMr)) {
    if (mapping != nullptr) munmap(mapping, mapping_length);
    return nullptr;
  }
  auto mr = std::make_shared<Mr>();
  mr->handle.owner = mr.get();
  mr->pd = pd;
  mr->iova = iova;
  mr->base = base;
  mr->length = length;
  mr->access = access;
  mr->mapping = mapping;
  mr->mapping_length = mapping_length;
  ibv_mr& v = mr->handle.verbs;
  v.context = verbs_pd->context;
  v.pd = verbs_pd;
  v.addr = addr;
  v.length = length;
  v.handle = next_handle();
  context_of(verbs_pd->context)->nic->add_mr(mr);
  pd->users.fetch_add(1);
  return &v;
}

}  // namespace

SOFTVERBS_API ibv_mr*(ibv_reg_mr)(ibv_pd* pd, void* addr, size_t length, int access) {
  return register_mr(pd, addr, length, reinterpret_cast<uintptr_t>(addr), access, nullptr, 0,
                     static_cast<char*>(addr));
}

SOFTVERBS_API ibv_mr*(ibv_reg_mr_iova)(ibv_pd* pd, void* addr, size_t length, uint64_t iova,
                                       int access) {
  return register_mr(pd, addr, length, iova, access, nullptr, 0, static_cast<char*>(addr));
}

SOFTVERBS_API ibv_mr* ibv_reg_mr_iova2(ibv_pd* pd, void* addr, size_t length, uint64_t iova,
                                       unsigned int access) {
  return register_mr(pd, addr, length, iova, static_cast<int>(access), nullptr, 0,
                     static_cast<char*>(addr));
}

SOFTVERBS_API ibv_mr* ibv_reg_dmabuf_mr(ibv_pd* pd, uint64_t offset, size_t length, uint64_t iova,
                                        int fd, int access) {
  if (env_long("SOFTVERBS_DMABUF", 1) == 0) {
    errno = EOPNOTSUPP;
    return nullptr;
  }
  // NCCL probes support with fd -1: EBADF means "supported".
  if (fd < 0) {
    errno = EBADF;
    return nullptr;
  }
  if (length == 0) {
    errno = EINVAL;
    return nullptr;
  }
  // The same pages as the exporter's: map the buffer shared.
  const uint64_t page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  uint64_t aligned = offset & ~(page - 1);
  uint64_t delta = offset - aligned;
  size_t map_length = static_cast<size_t>((delta + length + page - 1) & ~(page - 1));
  void* mapping = mmap(nullptr, map_length, PROT_READ | PROT_WRITE, MAP_SHARED, fd,
                       static_cast<off_t>(aligned));
  if (mapping == MAP_FAILED) return nullptr;
  return register_mr(pd, reinterpret_cast<void*>(iova), length, iova, access, mapping, map_length,
                     static_cast<char*>(mapping) + delta);
}

SOFTVERBS_API int ibv_dereg_mr(ibv_mr* verbs_mr) {
  Mr* mr = owner_of<Mr>(verbs_mr);
  if (mr == nullptr) return EINVAL;
  Pd* pd = mr->pd;
  // In-flight WRs keep the region (and a dma-buf mapping) until they finish.
  context_of(verbs_mr->context)->nic->remove_mr(mr);
  pd->users.fetch_sub(1);
  release_object(LimitedObject::kMr);
  return 0;
}
