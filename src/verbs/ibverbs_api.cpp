#include "verbs/ibverbs_api.h"

#include <dlfcn.h>

namespace weft::verbs {
namespace {

template <typename Function>
bool resolve(void* library, const char* name, Function* out, std::string* missing) {
  *out = reinterpret_cast<Function>(dlsym(library, name));
  if (*out != nullptr) return true;
  if (missing != nullptr) *missing += (missing->empty() ? "" : ", ") + std::string(name);
  return false;
}

}  // namespace

std::shared_ptr<const Ibverbs> Ibverbs::load(const std::string& path, std::string* reason) {
  std::shared_ptr<Ibverbs> loaded(new Ibverbs());
  loaded->path_ = path;
  loaded->library_ = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (loaded->library_ == nullptr) {
    const char* text = dlerror();
    *reason = "cannot load " + path + " (" + (text != nullptr ? text : "unknown error") +
              "); install rdma-core (libibverbs1) or set WEFT_IBVERBS_LIB";
    return nullptr;
  }
  void* lib = loaded->library_;
  IbverbsApi& api = loaded->api_;
  std::string missing;
  resolve(lib, "ibv_get_device_list", &api.get_device_list, &missing);
  resolve(lib, "ibv_free_device_list", &api.free_device_list, &missing);
  resolve(lib, "ibv_get_device_name", &api.get_device_name, &missing);
  resolve(lib, "ibv_open_device", &api.open_device, &missing);
  resolve(lib, "ibv_close_device", &api.close_device, &missing);
  resolve(lib, "ibv_query_device", &api.query_device, &missing);
  resolve(lib, "ibv_query_port", &api.query_port, &missing);
  resolve(lib, "ibv_query_gid", &api.query_gid, &missing);
  resolve(lib, "ibv_alloc_pd", &api.alloc_pd, &missing);
  resolve(lib, "ibv_dealloc_pd", &api.dealloc_pd, &missing);
  resolve(lib, "ibv_reg_mr", &api.reg_mr, &missing);
  resolve(lib, "ibv_dereg_mr", &api.dereg_mr, &missing);
  resolve(lib, "ibv_create_comp_channel", &api.create_comp_channel, &missing);
  resolve(lib, "ibv_destroy_comp_channel", &api.destroy_comp_channel, &missing);
  resolve(lib, "ibv_create_cq", &api.create_cq, &missing);
  resolve(lib, "ibv_destroy_cq", &api.destroy_cq, &missing);
  resolve(lib, "ibv_create_qp", &api.create_qp, &missing);
  resolve(lib, "ibv_modify_qp", &api.modify_qp, &missing);
  resolve(lib, "ibv_destroy_qp", &api.destroy_qp, &missing);
  resolve(lib, "ibv_get_async_event", &api.get_async_event, &missing);
  resolve(lib, "ibv_ack_async_event", &api.ack_async_event, &missing);
  resolve(lib, "ibv_wc_status_str", &api.wc_status_str, &missing);
  resolve(lib, "ibv_event_type_str", &api.event_type_str, &missing);
  if (!missing.empty()) {
    *reason = path + " lacks " + missing + " (not libibverbs, or too old)";
    return nullptr;
  }
  resolve(lib, "ibv_reg_mr_iova2", &api.reg_mr_iova2, nullptr);
  resolve(lib, "ibv_reg_dmabuf_mr", &api.reg_dmabuf_mr, nullptr);
  resolve(lib, "ibv_query_ece", &api.query_ece, nullptr);
  resolve(lib, "ibv_set_ece", &api.set_ece, nullptr);
  resolve(lib, "_ibv_query_gid_ex", &api.query_gid_ex, nullptr);
  return loaded;
}

Ibverbs::~Ibverbs() {
  if (library_ != nullptr) dlclose(library_);
}

}  // namespace weft::verbs
