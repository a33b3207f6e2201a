// Backend over an ncclNet plugin, used the way NCCL's proxy uses it:
// one send comm and one recv comm to the peer, buffers (host, or GPU with
// --mem cuda) registered once, isend/irecv/test polled from one thread,
// iflush after receives into GPU memory. One-sided tests drive the same
// library's RMA (or GIN) table through weft::RmaClient: a collective comm
// of the two ranks, one context, one symmetric window.
#include <algorithm>
#include <chrono>
#include <cstring>
#include <vector>

#include "backend.h"
#include "bootstrap.h"
#include "errors.h"
#include "options.h"
#include "weft_client/net_client.h"
#include "weft_client/rma_client.h"

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
    // One-sided runs need only the RMA/GIN table: a library with no net
    // table (a vendor's libnccl-rma.so) can be measured too.
    if (opts.runs_one_sided()) {
      open_rma();
      return;
    }
    client_ = open_plugin_device(opts);
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
    close_window();
    if (rma_ctx_ != nullptr) rma_.finalize(rma_ctx_);
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
    if (!client_) {
      return {{"transport", "plugin"},
              {"plugin", opts_.plugin_path},
              {"one_sided", rma_.symbol()},
              {"device", std::to_string(opts_.dev)},
              {"ptr_support", ptr_support_text(rma_ptr_support_)}};
    }
    Facts facts{{"transport", "plugin"},
                {"plugin", opts_.plugin_path},
                {"abi", std::to_string(client_->abi_version())},
                {"name", client_->plugin_name()},
                {"device", std::to_string(opts_.dev) + ":" + info_.name},
                {"speed_mbps", std::to_string(info_.speed_mbps)},
                {"max_recvs", std::to_string(info_.max_recvs)},
                {"ptr_support", ptr_support_text(info_.ptr_support)}};
    return facts;
  }

  std::string label() const override {
    if (!client_) {
      std::string file = opts_.plugin_path.substr(opts_.plugin_path.rfind('/') + 1);
      return file + " " + rma_.symbol() + " (device " + std::to_string(opts_.dev) + ")";
    }
    return std::string(client_->plugin_name()) + " v" + std::to_string(client_->abi_version()) +
           " (" + info_.name + ")";
  }

  // One-sided: the plugin cuts operations itself.
  size_t max_message_bytes() const override { return client_ ? info_.max_p2p_bytes : SIZE_MAX; }
  int max_recvs() const override { return client_ ? std::min(info_.max_recvs, kMaxGroup) : 1; }

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

  void open_window(Bootstrap& boot, int rank, char* data, size_t size) override {
    char mine[NCCL_NET_HANDLE_MAXSIZE] = {};
    char theirs[NCCL_NET_HANDLE_MAXSIZE] = {};
    void* listen = nullptr;
    check(rma_call("listen"), rma_.listen(rma_ctx_, opts_.dev, mine, &listen));
    boot.send(MsgKind::address, mine, sizeof(mine));
    boot.recv(MsgKind::address, theirs, sizeof(theirs));
    void* handles[2];
    handles[rank] = mine;
    handles[1 - rank] = theirs;
    peer_ = static_cast<uint32_t>(1 - rank);
    // Blocks until both ranks are in (the plugin's connect timeout bounds it).
    ncclResult_t r = rma_.connect(rma_ctx_, handles, 2, rank, listen, &rma_comm_);
    rma_.close_listen(listen);
    check(rma_call("connect"), r);
    check(rma_call("createContext"), rma_.create_context(rma_comm_, 1, 2, &target_));
    check(rma_call("regMrSym"), rma_.reg(rma_comm_, data, size, NCCL_PTR_HOST, 0, &window_mh_));
    window_ = data;
  }

  void close_window() noexcept override {
    if (window_mh_ != nullptr) rma_.dereg(rma_comm_, window_mh_);
    window_mh_ = nullptr;
    if (rma_comm_ != nullptr) {
      rma_.destroy_context(target_);
      rma_.close_coll(rma_comm_);
    }
    rma_comm_ = nullptr;
  }

  void* post_put(size_t local, size_t remote, size_t size, bool signal) override {
    void* req = nullptr;
    ncclResult_t r =
        signal ? rma_.put_signal(target_, 0, local, window_mh_, size, remote, window_mh_, peer_, 0,
                                 window_mh_, 1, NCCL_NET_SIGNAL_OP_ADD, true, &req)
               : rma_.put(target_, 0, local, window_mh_, size, remote, window_mh_, peer_, &req);
    if (r != ncclSuccess) fail(signal ? "iputSignal" : "iput", r);
    return req;
  }

  void* post_get(size_t local, size_t remote, size_t size) override {
    void* req = nullptr;
    ncclResult_t r = rma_.get(target_, 0, remote, window_mh_, size, local, window_mh_, peer_, &req);
    if (r != ncclSuccess) fail("iget", r);
    return req;
  }

  bool test_one_sided(void* request) override {
    int done = 0;
    ncclResult_t r = rma_.test(rma_comm_, request, &done);
    if (r != ncclSuccess) fail("test (one-sided)", r);
    return done != 0;
  }

  uint64_t signals_arrived() override {
    ncclResult_t r = rma_.progress(target_);
    if (r != ncclSuccess) fail("progress", r);
    // The window's first word: the peer's signals add to it.
    return __atomic_load_n(reinterpret_cast<const uint64_t*>(window_), __ATOMIC_ACQUIRE);
  }

 private:
  std::string rma_call(const char* what) const { return rma_.symbol() + " " + what; }

  void open_rma() {
    std::string error;
    if (!rma_.load(opts_.plugin_path, opts_.rma_table, &error)) {
      throw PerfError("plugin: " + error + " (see --rma-table)");
    }
    check(rma_call("init"), rma_.init(&rma_ctx_));
    int ndev = 0;
    check(rma_call("devices"), rma_.devices(&ndev));
    if (opts_.dev >= ndev) {
      throw PerfError("plugin: " + rma_.symbol() + " reports " + std::to_string(ndev) +
                      " device(s); device " + std::to_string(opts_.dev) + " requested (see --dev)");
    }
    int device_type = 0, max_recvs = 0;
    check(rma_call("getProperties"),
          rma_.properties(opts_.dev, &device_type, &max_recvs, &rma_ptr_support_));
    if ((rma_ptr_support_ & NCCL_PTR_HOST) == 0) {
      throw PerfError("plugin: " + rma_.symbol() + " device " + std::to_string(opts_.dev) +
                      " does not take host memory (ptrSupport " +
                      ptr_support_text(rma_ptr_support_) + ")");
    }
  }

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
  void check(const std::string& what, ncclResult_t r) const { check(what.c_str(), r); }
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
  // One-sided tests.
  RmaClient rma_;
  void* rma_ctx_ = nullptr;
  void* rma_comm_ = nullptr;
  RmaTarget target_;
  void* window_mh_ = nullptr;
  char* window_ = nullptr;
  uint32_t peer_ = 0;
  int rma_ptr_support_ = 0;
};

}  // namespace

std::unique_ptr<NetClient> open_plugin_device(const Options& opts) {
  std::string error;
  std::unique_ptr<NetClient> client = NetClient::load(opts.plugin_path, opts.abi, error);
  if (!client) throw PerfError("plugin: " + error);
  auto check = [&](const char* what, ncclResult_t r) {
    if (r != ncclSuccess) {
      throw PerfError(std::string("plugin ") + client->plugin_name() + ": " + what +
                      " failed: " + nccl_result_name(r));
    }
  };
  check("init", client->init());
  int ndev = 0;
  check("devices", client->devices(&ndev));
  if (opts.dev >= ndev) {
    throw PerfError("plugin: device " + std::to_string(opts.dev) + " requested but " +
                    client->plugin_name() + " reports " + std::to_string(ndev) +
                    " device(s) (see --dev)");
  }
  return client;
}

std::unique_ptr<Backend> make_plugin_backend(const Options& opts) {
  return std::make_unique<PluginBackend>(opts);
}

}  // namespace weft::perf
