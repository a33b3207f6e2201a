// Entry points that programs linked against rdma-core's libibverbs need to
// load (librdmacm, which libfabric links, binds every symbol at load time)
// but that softverbs does not model: shared receive queues and multicast
// fail with EOPNOTSUPP; the kernel-ABI copy helpers (rdma_cm only) zero their
// output; the sysfs helpers read the real tree.

#include <endian.h>
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "ibverbs/api.h"
#include "model/context.h"

using namespace softverbs;

SOFTVERBS_API ibv_srq* ibv_create_srq(ibv_pd* /*pd*/, ibv_srq_init_attr* /*attr*/) {
  errno = EOPNOTSUPP;
  return nullptr;
}

SOFTVERBS_API int ibv_destroy_srq(ibv_srq* /*srq*/) {
  return EOPNOTSUPP;
}

SOFTVERBS_API int ibv_attach_mcast(ibv_qp* /*qp*/, const ibv_gid* /*gid*/, uint16_t /*lid*/) {
  return EOPNOTSUPP;
}

SOFTVERBS_API int ibv_detach_mcast(ibv_qp* /*qp*/, const ibv_gid* /*gid*/, uint16_t /*lid*/) {
  return EOPNOTSUPP;
}

// The kernel structs are opaque here: only rdma_cm's kernel path calls these.
SOFTVERBS_API void ibv_copy_ah_attr_from_kern(ibv_ah_attr* dst, const void* /*src*/) {
  std::memset(dst, 0, sizeof(*dst));
}

SOFTVERBS_API void ibv_copy_qp_attr_from_kern(ibv_qp_attr* dst, const void* /*src*/) {
  std::memset(dst, 0, sizeof(*dst));
}

SOFTVERBS_API void ibv_copy_path_rec_from_kern(void* /*dst*/, const void* /*src*/) {}

// One P_Key (0xffff) at index 0, as ibv_query_pkey reports.
SOFTVERBS_API int ibv_get_pkey_index(ibv_context* verbs_ctx, uint8_t port_num, __be16 pkey) {
  Context* context = context_of(verbs_ctx);
  if (context == nullptr || port_num < 1 || port_num > context->info().ports.size()) {
    return -EINVAL;
  }
  return (be16toh(pkey) & 0x7fff) == 0x7fff ? 0 : -ENOENT;
}

SOFTVERBS_API int ibv_get_sysfs_path(char* path, size_t size) {
  const char* env = getuid() == geteuid() ? std::getenv("SYSFS_PATH") : nullptr;
  int n = std::snprintf(path, size, "%s", env != nullptr ? env : "/sys");
  return n < 0 || static_cast<size_t>(n) >= size ? -1 : 0;
}

SOFTVERBS_API int ibv_read_sysfs_file(const char* dir, const char* file, char* buf, size_t size) {
  char path[4096];
  std::snprintf(path, sizeof(path), "%s/%s", dir, file);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  ssize_t n = read(fd, buf, size);
  close(fd);
  if (n <= 0) return -1;
  if (static_cast<size_t>(n) == size) --n;
  buf[n] = '\0';
  if (n > 0 && buf[n - 1] == '\n') buf[--n] = '\0';
  return static_cast<int>(n);
}
