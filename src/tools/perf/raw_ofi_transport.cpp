// Transport straight on libfabric: one FI_EP_RDM endpoint, tagged
// messages, manual progress by polling the CQ. No plugin involved, so the
// same patterns measure the provider's own ceiling.
#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>

#include <cstring>
#include <vector>

#include "bootstrap.h"
#include "errors.h"
#include "options.h"
#include "transport.h"

namespace weft::perf {
namespace {

constexpr uint64_t kTag = 0x77656674;  // one stream per direction; ordered matching
constexpr size_t kCqBatch = 16;
constexpr size_t kMaxAddrLen = 256;

std::string fi_error(const char* what, ssize_t rc) {
  return std::string(what) + ": " + fi_strerror(static_cast<int>(-rc)) + " (" + std::to_string(rc) +
         ")";
}

template <class T>
struct FidCloser {
  void operator()(T* p) const {
    if (p != nullptr) fi_close(&p->fid);
  }
};
template <class T>
using FidPtr = std::unique_ptr<T, FidCloser<T>>;

struct InfoDeleter {
  void operator()(fi_info* p) const {
    if (p != nullptr) fi_freeinfo(p);
  }
};
using InfoPtr = std::unique_ptr<fi_info, InfoDeleter>;

// fi_context2 first: the provider owns it while the operation is pending
// (FI_CONTEXT/FI_CONTEXT2 mode) and hands it back as op_context.
struct OfiRequest {
  fi_context2 ctx;
  size_t len = 0;
  bool done = false;
  OfiRequest* next_free = nullptr;
};

struct RawMr {
  FidPtr<fid_mr> mr;
  void* desc = nullptr;
};

class RawOfiTransport final : public Transport {
 public:
  explicit RawOfiTransport(const Options& opts) : opts_(opts) {
    InfoPtr hints(fi_allocinfo());
    if (!hints) throw PerfError("raw-ofi: fi_allocinfo failed");
    hints->caps = FI_TAGGED;
    hints->ep_attr->type = FI_EP_RDM;
    hints->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY;
    hints->mode = FI_CONTEXT | FI_CONTEXT2;
    // One thread drives the endpoint: skip the provider's internal locking
    // (as fabtests do), or locks would count against the provider ceiling.
    hints->domain_attr->threading = FI_THREAD_DOMAIN;
    hints->fabric_attr->prov_name = strdup(opts.raw_provider.c_str());
    if (!opts.domain.empty()) hints->domain_attr->name = strdup(opts.domain.c_str());

    fi_info* found = nullptr;
    int rc = fi_getinfo(FI_VERSION(FI_MAJOR_VERSION, FI_MINOR_VERSION), nullptr, nullptr, 0,
                        hints.get(), &found);
    if (rc != 0 || found == nullptr) {
      throw PerfError(
          "raw-ofi: no FI_EP_RDM endpoint with FI_TAGGED from provider '" + opts.raw_provider +
          "'" + (opts.domain.empty() ? "" : " in domain '" + opts.domain + "'") + ": " +
          fi_strerror(-rc) + " (check `fi_info -p " + opts.raw_provider + " -t FI_EP_RDM`)");
    }
    InfoPtr list(found);
    // Layered providers (tcp;ofi_rxm in 1.17) ignore the domain hint: filter.
    fi_info* chosen = list.get();
    if (!opts.domain.empty()) {
      std::string seen;
      for (chosen = list.get(); chosen != nullptr; chosen = chosen->next) {
        const char* d = chosen->domain_attr->name;
        if (d != nullptr && opts.domain == d) break;
        if (d != nullptr && seen.find(std::string(" ") + d + ",") == std::string::npos) {
          seen += std::string(" ") + d + ",";
        }
      }
      if (chosen == nullptr) {
        throw PerfError("raw-ofi: provider '" + opts.raw_provider + "' has no domain '" +
                        opts.domain + "' (domains:" + seen.substr(0, seen.size() - 1) + ")");
      }
    }
    info_.reset(fi_dupinfo(chosen));
    if (!info_) throw PerfError("raw-ofi: fi_dupinfo failed");
    need_mr_ = (info_->domain_attr->mr_mode & FI_MR_LOCAL) != 0;

    fid_fabric* fabric = nullptr;
    check("fi_fabric", fi_fabric(info_->fabric_attr, &fabric, nullptr));
    fabric_.reset(fabric);
    fid_domain* domain = nullptr;
    check("fi_domain", fi_domain(fabric_.get(), info_.get(), &domain, nullptr));
    domain_.reset(domain);

    // Room for every request we may have outstanding, both directions.
    size_t pool = 2 * static_cast<size_t>(opts.depth) + 16;
    fi_cq_attr cq_attr{};
    cq_attr.format = FI_CQ_FORMAT_TAGGED;
    cq_attr.wait_obj = FI_WAIT_NONE;
    cq_attr.size = pool * 2;
    fid_cq* cq = nullptr;
    check("fi_cq_open", fi_cq_open(domain_.get(), &cq_attr, &cq, nullptr));
    cq_.reset(cq);

    fi_av_attr av_attr{};
    av_attr.type = FI_AV_TABLE;
    av_attr.count = 4;
    fid_av* av = nullptr;
    check("fi_av_open", fi_av_open(domain_.get(), &av_attr, &av, nullptr));
    av_.reset(av);

    fid_ep* ep = nullptr;
    check("fi_endpoint", fi_endpoint(domain_.get(), info_.get(), &ep, nullptr));
    ep_.reset(ep);
    check("fi_ep_bind(av)", fi_ep_bind(ep_.get(), &av_->fid, 0));
    check("fi_ep_bind(cq)", fi_ep_bind(ep_.get(), &cq_->fid, FI_TRANSMIT | FI_RECV));
    check("fi_enable", fi_enable(ep_.get()));

    requests_.resize(pool);
    for (auto& r : requests_) release(&r);
  }

  std::vector<std::pair<std::string, std::string>> describe() const override {
    return {{"transport", "raw-ofi"},
            {"provider", info_->fabric_attr->prov_name ? info_->fabric_attr->prov_name : "?"},
            {"fabric", info_->fabric_attr->name ? info_->fabric_attr->name : "?"},
            {"domain", info_->domain_attr->name ? info_->domain_attr->name : "?"},
            {"mr_local", need_mr_ ? "yes" : "no"}};
  }

  size_t max_message_bytes() const override { return info_->ep_attr->max_msg_size; }

  void connect(Bootstrap& boot) override {
    char name[kMaxAddrLen] = {};
    size_t len = sizeof(name) - 1;  // keep a NUL for FI_ADDR_STR names
    check("fi_getname", fi_getname(&ep_->fid, name, &len));
    boot.send(MsgKind::address, name, len);
    char peer[kMaxAddrLen] = {};
    size_t peer_len = boot.recv_var(MsgKind::address, peer, sizeof(peer) - 1);
    (void)peer_len;
    int n = fi_av_insert(av_.get(), peer, 1, &peer_addr_, 0, nullptr);
    if (n != 1) {
      throw PerfError("raw-ofi: fi_av_insert of the peer's address failed (" + std::to_string(n) +
                      ")");
    }
  }

  void* register_memory(Direction, void* data, size_t size) override {
    if (!need_mr_) return nullptr;
    auto mr = std::make_unique<RawMr>();
    fid_mr* raw = nullptr;
    check("fi_mr_reg", fi_mr_reg(domain_.get(), data, size, FI_SEND | FI_RECV, 0, next_key_++, 0,
                                 &raw, nullptr));
    mr->mr.reset(raw);
    mr->desc = fi_mr_desc(raw);
    return mr.release();
  }

  void deregister_memory(Direction, void* handle) noexcept override {
    delete static_cast<RawMr*>(handle);
  }

  void* post_send(void* data, size_t size, void* mr) override {
    OfiRequest* r = acquire();
    if (r == nullptr) return nullptr;
    r->len = size;
    ssize_t rc = fi_tsend(ep_.get(), data, size, desc(mr), peer_addr_, kTag, &r->ctx);
    return posted(r, rc, "fi_tsend");
  }

  void* post_recv(void* data, size_t size, void* mr) override {
    OfiRequest* r = acquire();
    if (r == nullptr) return nullptr;
    r->len = size;
    ssize_t rc = fi_trecv(ep_.get(), data, size, desc(mr), peer_addr_, kTag, 0, &r->ctx);
    return posted(r, rc, "fi_trecv");
  }

  bool test(void* request, size_t* size) override {
    auto* r = static_cast<OfiRequest*>(request);
    if (!r->done) progress();
    if (!r->done) return false;
    *size = r->len;
    release(r);
    return true;
  }

 private:
  static void* desc(void* mr) { return mr != nullptr ? static_cast<RawMr*>(mr)->desc : nullptr; }

  void check(const char* what, ssize_t rc) const {
    if (rc != 0) throw PerfError("raw-ofi " + opts_.raw_provider + ": " + fi_error(what, rc));
  }

  OfiRequest* acquire() {
    OfiRequest* r = free_;
    if (r != nullptr) {
      free_ = r->next_free;
      r->done = false;
    }
    return r;
  }
  void release(OfiRequest* r) {
    r->next_free = free_;
    free_ = r;
  }

  void* posted(OfiRequest* r, ssize_t rc, const char* what) {
    if (rc == 0) return r;
    release(r);
    if (rc == -FI_EAGAIN) {
      progress();  // the provider needs progress to free its queue
      return nullptr;
    }
    check(what, rc);
    return nullptr;
  }

  void progress() {
    fi_cq_tagged_entry entries[kCqBatch];
    for (;;) {
      ssize_t n = fi_cq_read(cq_.get(), entries, kCqBatch);
      if (n == -FI_EAGAIN) return;
      if (n == -FI_EAVAIL) report_cq_error();
      if (n < 0) check("fi_cq_read", n);
      for (ssize_t i = 0; i < n; ++i) {
        auto* r = static_cast<OfiRequest*>(entries[i].op_context);
        r->done = true;
        if ((entries[i].flags & FI_RECV) != 0) r->len = entries[i].len;
      }
      if (static_cast<size_t>(n) < kCqBatch) return;
    }
  }

  [[noreturn]] void report_cq_error() {
    fi_cq_err_entry err{};
    ssize_t rc = fi_cq_readerr(cq_.get(), &err, 0);
    if (rc < 0) check("fi_cq_readerr", rc);
    const char* detail = fi_cq_strerror(cq_.get(), err.prov_errno, err.err_data, nullptr, 0);
    throw PerfError("raw-ofi " + opts_.raw_provider + ": operation failed: " +
                    fi_strerror(err.err) + " (" + (detail ? detail : "") + ")" +
                    (err.err == FI_ETRUNC ? ": message larger than the posted receive"
                                          : ": the peer may have died"));
  }

  const Options& opts_;
  InfoPtr info_;
  FidPtr<fid_fabric> fabric_;
  FidPtr<fid_domain> domain_;
  FidPtr<fid_cq> cq_;
  FidPtr<fid_av> av_;
  FidPtr<fid_ep> ep_;  // closed first: declared last
  fi_addr_t peer_addr_ = FI_ADDR_UNSPEC;
  bool need_mr_ = false;
  uint64_t next_key_ = 1;
  std::vector<OfiRequest> requests_;
  OfiRequest* free_ = nullptr;
};

}  // namespace

std::unique_ptr<Transport> make_raw_ofi_transport(const Options& opts) {
  return std::make_unique<RawOfiTransport>(opts);
}

}  // namespace weft::perf
