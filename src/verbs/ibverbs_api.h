// libibverbs, loaded at run time: the plugin must load (and say why verbs
// is unavailable) on hosts without rdma-core, and tests substitute a
// software device library (softverbs) through WEFT_IBVERBS_LIB. Only the
// control-path calls are here; posting and polling go through the
// context's own function table (ibv_post_send & co. are inline).
#pragma once

#include <infiniband/verbs.h>

#include <memory>
#include <string>

namespace weft::verbs {

struct IbverbsApi {
  ibv_device** (*get_device_list)(int* count) = nullptr;
  void (*free_device_list)(ibv_device** list) = nullptr;
  const char* (*get_device_name)(ibv_device* device) = nullptr;
  ibv_context* (*open_device)(ibv_device* device) = nullptr;
  int (*close_device)(ibv_context* context) = nullptr;
  int (*query_device)(ibv_context* context, ibv_device_attr* attr) = nullptr;
  int (*query_port)(ibv_context* context, uint8_t port, ibv_port_attr* attr) = nullptr;
  int (*query_gid)(ibv_context* context, uint8_t port, int index, ibv_gid* gid) = nullptr;
  ibv_pd* (*alloc_pd)(ibv_context* context) = nullptr;
  int (*dealloc_pd)(ibv_pd* pd) = nullptr;
  ibv_mr* (*reg_mr)(ibv_pd* pd, void* address, size_t length, int access) = nullptr;
  int (*dereg_mr)(ibv_mr* mr) = nullptr;
  ibv_comp_channel* (*create_comp_channel)(ibv_context* context) = nullptr;
  int (*destroy_comp_channel)(ibv_comp_channel* channel) = nullptr;
  ibv_cq* (*create_cq)(ibv_context* context, int entries, void* user, ibv_comp_channel* channel,
                       int vector) = nullptr;
  int (*destroy_cq)(ibv_cq* cq) = nullptr;
  ibv_qp* (*create_qp)(ibv_pd* pd, ibv_qp_init_attr* attr) = nullptr;
  int (*modify_qp)(ibv_qp* qp, ibv_qp_attr* attr, int mask) = nullptr;
  int (*destroy_qp)(ibv_qp* qp) = nullptr;
  int (*get_async_event)(ibv_context* context, ibv_async_event* event) = nullptr;
  void (*ack_async_event)(ibv_async_event* event) = nullptr;
  const char* (*wc_status_str)(ibv_wc_status status) = nullptr;
  const char* (*event_type_str)(ibv_event_type type) = nullptr;
  // Optional: newer rdma-core only (nullptr where missing).
  ibv_mr* (*reg_mr_iova2)(ibv_pd* pd, void* address, size_t length, uint64_t iova,
                          unsigned int access) = nullptr;
  ibv_mr* (*reg_dmabuf_mr)(ibv_pd* pd, uint64_t offset, size_t length, uint64_t iova, int fd,
                           int access) = nullptr;
  int (*query_ece)(ibv_qp* qp, ibv_ece* ece) = nullptr;
  int (*set_ece)(ibv_qp* qp, ibv_ece* ece) = nullptr;
  // rdma-core >= 32: GID type without reading sysfs (ibv_query_gid_ex's target).
  int (*query_gid_ex)(ibv_context* context, uint32_t port, uint32_t index, ibv_gid_entry* entry,
                      uint32_t flags, size_t entry_size) = nullptr;
};

// A loaded library; unloads when the last holder lets go.
class Ibverbs {
 public:
  // dlopen(path) and resolve every required symbol; on failure nullptr and
  // the reason (missing library, missing symbol) in *reason.
  static std::shared_ptr<const Ibverbs> load(const std::string& path, std::string* reason);
  ~Ibverbs();
  Ibverbs(const Ibverbs&) = delete;
  Ibverbs& operator=(const Ibverbs&) = delete;

  const IbverbsApi& api() const { return api_; }
  const std::string& path() const { return path_; }

 private:
  Ibverbs() = default;
  void* library_ = nullptr;
  std::string path_;
  IbverbsApi api_;
};

}  // namespace weft::verbs
