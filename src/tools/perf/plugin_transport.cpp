// Transport over an ncclNet plugin, used the way NCCL's proxy uses it:
// one send comm and one recv comm to the peer, host buffers registered once,
// isend/irecv/test polled from one thread.
#include <chrono>
#include <cstring>

#include "bootstrap.h"
#include "errors.h"
#include "options.h"
#include "transport.h"
#include "weft/net_client.h"

namespace weft::perf {
namespace {

const char* result_name(ncclResult_t r) {
  switch (r) {
    case ncclSuccess:
      return "ncclSuccess";
    case ncclUnhandledCudaError:
      return "ncclUnhandledCudaError";
    case ncclSystemError:
      return "ncclSystemError";
    case ncclInternalError:
      return "ncclInternalError";
    case ncclInvalidArgument:
      return "ncclInvalidArgument";
    case ncclInvalidUsage:
      return "ncclInvalidUsage";
    case ncclRemoteError:
      return "ncclRemoteError";
    case ncclInProgress:
      return "ncclInProgress";
    default:
      return "unknown ncclResult_t";
  }
}

class PluginTransport final : public Transport {
 public:
  explicit PluginTransport(const Options& opts) : opts_(opts) {
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
  }

  ~PluginTransport() override {
    // Comms go before finalize/dlclose (NetClient's destructor).
    if (send_comm_ != nullptr) client_->close_send(send_comm_);
    if (recv_comm_ != nullptr) client_->close_recv(recv_comm_);
    if (listen_comm_ != nullptr) client_->close_listen(listen_comm_);
  }

  std::vector<std::pair<std::string, std::string>> describe() const override {
    return {{"transport", "plugin"},
            {"plugin", opts_.plugin_path},
            {"abi", std::to_string(client_->abi_version())},
            {"name", client_->plugin_name()},
            {"device", std::to_string(opts_.dev) + ":" + info_.name},
            {"speed_mbps", std::to_string(info_.speed_mbps)}};
  }

  size_t max_message_bytes() const override { return info_.max_p2p_bytes; }

  void connect(Bootstrap& boot) override {
    char handle[NCCL_NET_HANDLE_MAXSIZE] = {};
    char peer_handle[NCCL_NET_HANDLE_MAXSIZE] = {};
    check("listen", client_->listen(opts_.dev, handle, &listen_comm_));
    boot.send(MsgKind::address, handle, sizeof(handle));
    boot.recv(MsgKind::address, peer_handle, sizeof(peer_handle));
    // connect/accept never block: alternate them like NCCL's proxy does.
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(opts_.timeout_s);
    unsigned spins = 0;
    while (send_comm_ == nullptr || recv_comm_ == nullptr) {
      if (send_comm_ == nullptr) {
        check("connect", client_->connect(opts_.dev, peer_handle, &send_comm_));
      }
      if (recv_comm_ == nullptr) check("accept", client_->accept(listen_comm_, &recv_comm_));
      if ((++spins & 0x3ff) == 0) {
        boot.check_peer();
        if (std::chrono::steady_clock::now() > deadline) {
          throw PerfError(std::string("plugin: connection with peer ") + boot.peer() +
                          " not established within " + std::to_string(opts_.timeout_s) +
                          " s (send comm " + (send_comm_ ? "ready" : "pending") + ", recv comm " +
                          (recv_comm_ ? "ready" : "pending") + ")");
        }
      }
    }
    check("closeListen", client_->close_listen(listen_comm_));
    listen_comm_ = nullptr;
  }

  void* register_memory(Direction dir, void* data, size_t size) override {
    void* mh = nullptr;
    void* comm = dir == Direction::send ? send_comm_ : recv_comm_;
    check("regMr", client_->reg_mr(comm, data, size, NCCL_PTR_HOST, &mh));
    return mh;
  }

  void deregister_memory(Direction dir, void* handle) noexcept override {
    void* comm = dir == Direction::send ? send_comm_ : recv_comm_;
    client_->dereg_mr(comm, handle);
  }

  void* post_send(void* data, size_t size, void* mr) override {
    void* req = nullptr;
    ncclResult_t r = client_->isend(send_comm_, data, size, kTag, mr, &req);
    if (r != ncclSuccess) fail("isend", r);
    return req;
  }

  void* post_recv(void* data, size_t size, void* mr) override {
    void* req = nullptr;
    int tag = kTag;
    ncclResult_t r = client_->irecv(recv_comm_, 1, &data, &size, &tag, &mr, &req);
    if (r != ncclSuccess) fail("irecv", r);
    return req;
  }

  bool test(void* request, size_t* size) override {
    int done = 0;
    int bytes = 0;
    ncclResult_t r = client_->test(request, &done, &bytes);
    if (r != ncclSuccess) fail("test", r);
    if (done != 0) *size = static_cast<size_t>(bytes);
    return done != 0;
  }

 private:
  static constexpr int kTag = 0;

  void check(const char* what, ncclResult_t r) const {
    if (r != ncclSuccess) fail(what, r);
  }
  [[noreturn]] void fail(const char* what, ncclResult_t r) const {
    throw PerfError(std::string("plugin ") + client_->plugin_name() + ": " + what +
                    " failed: " + result_name(r) + " (" + std::to_string(static_cast<int>(r)) +
                    ")" + (r == ncclRemoteError ? ": the peer may have died" : ""));
  }

  const Options& opts_;
  std::unique_ptr<NetClient> client_;
  NetDeviceInfo info_;
  void* listen_comm_ = nullptr;
  void* send_comm_ = nullptr;
  void* recv_comm_ = nullptr;
};

}  // namespace

std::unique_ptr<Transport> make_plugin_transport(const Options& opts) {
  return std::make_unique<PluginTransport>(opts);
}

}  // namespace weft::perf
