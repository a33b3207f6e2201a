// Backend over an ncclNet plugin, used the way NCCL's proxy uses it:
// one send comm and one recv comm to the peer, buffers (host, or GPU with
// --mem cuda) registered once, isend/irecv/test polled from one thread,
// iflush after receives into GPU memory.
#include <algorithm>
#include <chrono>
#include <cstring>
#include <vector>

#include "backend.h"
#include "bootstrap.h"
#include "errors.h"
#include "options.h"
#include "weft/net_client.h"

namespace weft::perf {
namespace {

// "host,cuda,dmabuf": the NCCL_PTR_* bits of ptrSupport, for the report
// header and error messages.
std::string ptr_support_text(int bits) {
  std::string text;
  auto add = [&](int bit, const char* name) {
    if ((bits & bit) == 0) return;
    if (!text.empty()) text += ',';
    text += name;
  };
  add(NCCL_PTR_HOST, "host");
  add(NCCL_PTR_CUDA, "cuda");
  add(NCCL_PTR_DMABUF, "dmabuf");
  return text.empty() ? "none" : text;
}

class PluginBackend final : public Backend {
 public:
  explicit PluginBackend(const Options& opts) : opts_(opts) {
    std::string error;
    client_ = NetClient::load(opts.plugin_path, opts.abi, error);
    if (!client_) throw PerfError("plugin: " + error);
    check("init", client_->init());
    int ndev = 0;
    check("devices", client_->devices(&ndev));
    if (opts.dev >= ndev) {
      throw PerfError("plugin: device " + std::to_string(opts.dev) + " requested but " +
                      client_->plugin_name() + " reports " + std::to_string(ndev) +
                      " device(s) (see --dev)");
    }
    check("getProperties", client_->properties(opts.dev, &info_));
    if ((info_.ptr_support & NCCL_PTR_HOST) == 0) {
      throw PerfError("plugin: device " + std::to_string(opts.dev) +
                      " does not support host memory (ptrSupport lacks NCCL_PTR_HOST)");
    }
    const std::string device = client_->plugin_name() + std::string(" device ") +
                               std::to_string(opts.dev) + " (" + info_.name + ")";
    if (opts.mem == MemType::cuda && (info_.ptr_support & NCCL_PTR_CUDA) == 0) {
      throw PerfError("--mem cuda: " + device + " does not take GPU memory: ptrSupport " +
                      ptr_support_text(info_.ptr_support) +
                      " lacks NCCL_PTR_CUDA (this libfabric/provider has no FI_HMEM CUDA "
                      "support, or the plugin found no usable CUDA driver; see its log)");
    }
    if (opts.dmabuf && (info_.ptr_support & NCCL_PTR_DMABUF) == 0) {
      throw PerfError("--dmabuf: " + device + " does not register dma-buf memory: ptrSupport " +
                      ptr_support_text(info_.ptr_support) +
                      " lacks NCCL_PTR_DMABUF (drop --dmabuf to register with regMr)");
    }
  }

  ~PluginBackend() override {
    // Comms go before finalize/dlclose (NetClient's destructor).
    for (void* c : send_comms_) {
      if (c != nullptr) client_->close_send(c);
    }
    for (void* c : recv_comms_) {
      if (c != nullptr) client_->close_recv(c);
    }
    for (void* c : listen_comms_) {
      if (c != nullptr) client_->close_listen(c);
    }
  }

  Facts describe() const override {
    return {{"transport", "plugin"},
            {"plugin", opts_.plugin_path},
            {"abi", std::to_string(client_->abi_version())},
            {"name", client_->plugin_name()},
            {"device", std::to_string(opts_.dev) + ":" + info_.name},
            {"speed_mbps", std::to_string(info_.speed_mbps)},
            {"max_recvs", std::to_string(info_.max_recvs)},
            {"ptr_support", ptr_support_text(info_.ptr_support)}};
  }

  std::string label() const override {
    return std::string(client_->plugin_name()) + " v" + std::to_string(client_->abi_version()) +
           " (" + info_.name + ")";
  }

  size_t max_message_bytes() const override { return info_.max_p2p_bytes; }
  int max_recvs() const override { return std::min(info_.max_recvs, kMaxGroup); }

  void connect(Bootstrap& boot, int comms) override {
    const size_t n = static_cast<size_t>(comms);
    std::vector<char> handles(n * NCCL_NET_HANDLE_MAXSIZE);
    std::vector<char> peer_handles(n * NCCL_NET_HANDLE_MAXSIZE);
    listen_comms_.assign(n, nullptr);
    send_comms_.assign(n, nullptr);
    recv_comms_.assign(n, nullptr);
    for (size_t i = 0; i < n; ++i) {
      check("listen",
            client_->listen(opts_.dev, &handles[i * NCCL_NET_HANDLE_MAXSIZE], &listen_comms_[i]));
    }
    boot.send(MsgKind::address, handles.data(), handles.size());
    boot.recv(MsgKind::address, peer_handles.data(), peer_handles.size());
    // connect/accept never block: alternate them like NCCL's proxy does.
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(opts_.timeout_s);
    unsigned spins = 0;
    size_t ready = 0;
    while (ready < 2 * n) {
      ready = 0;
      for (size_t i = 0; i < n; ++i) {
        if (send_comms_[i] == nullptr) {
          check("connect", client_->connect(opts_.dev, &peer_handles[i * NCCL_NET_HANDLE_MAXSIZE],
                                            &send_comms_[i]));
        }
        if (recv_comms_[i] == nullptr) {
          check("accept", client_->accept(listen_comms_[i], &recv_comms_[i]));
        }
        ready += (send_comms_[i] != nullptr) + (recv_comms_[i] != nullptr);
      }
      if ((++spins & 0x3ff) == 0 && ready < 2 * n) {
        boot.check_peer();
        if (std::chrono::steady_clock::now() > deadline) {
          throw PerfError("plugin: connection with peer " + boot.peer() +
                          " not established within " + std::to_string(opts_.timeout_s) + " s (" +
                          std::to_string(ready) + " of " + std::to_string(2 * n) +
                          " send/recv comms ready; is the plugin network reachable between the "
                          "hosts? see --timeout)");
        }
      }
    }
    for (void*& l : listen_comms_) {
      check("closeListen", client_->close_listen(l));
      l = nullptr;
    }
  }

  void* register_memory(int comm, Direction dir, void* data, size_t size,
                        MemoryKind kind) override {
    void* mh = nullptr;
    check("regMr", client_->reg_mr(comm_of(comm, dir), data, size, pointer_type(kind), &mh));
    return mh;
  }

  void* register_dmabuf(int comm, Direction dir, void* data, size_t size, uint64_t offset,
                        int fd) override {
    void* mh = nullptr;
    check("regMrDmaBuf",
          reg_mr_dma_buf(comm_of(comm, dir), data, size, NCCL_PTR_CUDA, offset, fd, &mh));
    return mh;
  }

  void deregister_memory(int comm, Direction dir, void* handle) noexcept override {
    client_->dereg_mr(comm_of(comm, dir), handle);
  }

  void* post_send(int comm, void* data, size_t size, int tag, void* mr) override {
    void* req = nullptr;
    ncclResult_t r =
        client_->isend(send_comms_[static_cast<size_t>(comm)], data, size, tag, mr, &req);
    if (r != ncclSuccess) fail("isend", r);
    return req;
  }

  void* post_recv(int comm, int n, void** data, size_t* sizes, int* tags, void** mrs) override {
    void* req = nullptr;
    ncclResult_t r =
        client_->irecv(recv_comms_[static_cast<size_t>(comm)], n, data, sizes, tags, mrs, &req);
    if (r != ncclSuccess) fail("irecv", r);
    return req;
  }

  bool test(int, void* request, int* sizes) override {
    int done = 0;
    ncclResult_t r = client_->test(request, &done, sizes);
    if (r != ncclSuccess) fail("test", r);
    return done != 0;
  }

  void* flush(int comm, int n, void** data, int* sizes, void** mrs) override {
    void* req = nullptr;
    ncclResult_t r =
        client_->iflush(recv_comms_[static_cast<size_t>(comm)], n, data, sizes, mrs, &req);
    if (r != ncclSuccess) fail("iflush", r);
    return req;
  }

 private:
  void* comm_of(int comm, Direction dir) const {
    return dir == Direction::send ? send_comms_[static_cast<size_t>(comm)]
                                  : recv_comms_[static_cast<size_t>(comm)];
  }

  static int pointer_type(MemoryKind kind) {
    return kind == MemoryKind::cuda ? NCCL_PTR_CUDA : NCCL_PTR_HOST;
  }

  // regMrDmaBuf has one signature from v6 to v12; NetClient does not wrap
  // it, so call it through whichever table was loaded.
  ncclResult_t reg_mr_dma_buf(void* comm, void* data, size_t size, int type, uint64_t offset,
                              int fd, void** mh) const {
    auto call = [&](const auto* t) -> ncclResult_t {
      if (t->regMrDmaBuf == nullptr) {
        throw PerfError(std::string("plugin ") + client_->plugin_name() +
                        ": regMrDmaBuf is NULL in its ncclNetPlugin_v" +
                        std::to_string(client_->abi_version()) + " table (drop --dmabuf)");
      }
      return t->regMrDmaBuf(comm, data, size, type, offset, fd, mh);
    };
    if (const auto* t = client_->v12()) return call(t);
    if (const auto* t = client_->v11()) return call(t);
    if (const auto* t = client_->v10()) return call(t);
    if (const auto* t = client_->v9()) return call(t);
    if (const auto* t = client_->v8()) return call(t);
    if (const auto* t = client_->v7()) return call(t);
    return call(client_->v6());
  }

  void check(const char* what, ncclResult_t r) const {
    if (r != ncclSuccess) fail(what, r);
  }
  [[noreturn]] void fail(const char* what, ncclResult_t r) const {
    throw PerfError(std::string("plugin ") + client_->plugin_name() + ": " + what +
                    " failed: " + nccl_result_name(r) + " (" + std::to_string(static_cast<int>(r)) +
                    ")" + (r == ncclRemoteError ? ": the peer may have died" : ""));
  }

  const Options& opts_;
  std::unique_ptr<NetClient> client_;
  NetDeviceInfo info_;
  std::vector<void*> listen_comms_;
  std::vector<void*> send_comms_;
  std::vector<void*> recv_comms_;
};

}  // namespace

std::unique_ptr<Backend> make_plugin_backend(const Options& opts) {
  return std::make_unique<PluginBackend>(opts);
}

}  // namespace weft::perf
