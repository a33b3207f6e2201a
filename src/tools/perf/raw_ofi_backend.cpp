// Backend straight on libfabric: one FI_EP_RDM endpoint per comm (in a
// domain of its own, so each comm's thread owns it and FI_THREAD_DOMAIN
// needs no locks), manual progress by polling the CQ. No plugin involved, so
// the same patterns measure the provider's own ceiling. Two operations:
//   tagged  fi_tsend / fi_trecv (fi_tinject up to the provider's inject
//           size); a grouped receive is n fi_trecv with the group's tags,
//           complete when all are.
//   write   fi_writedata into the peer's receive slot (both ranks' arenas
//           have the same layout, so the offset in our send arena is the
//           offset in theirs); the remote CQ data (the size) completes the
//           peer's oldest posted receive. The RMA ceiling, for comparison.
// One-sided tests (put, get, signal) use comm 0's endpoint on one window:
// fi_write, fi_read, and fi_writedata where a signal is asked (the remote
// CQ data counts as the signal). As weft does, delivery-complete is asked
// unless the provider orders writes after writes (FI_ORDER_WAW), so a
// signal never overtakes earlier data on either side of the comparison.
#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>
#include <rdma/fi_tagged.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "backend.h"
#include "bootstrap.h"
#include "errors.h"
#include "options.h"
#include "weft/params.h"

namespace weft::perf {
namespace {

constexpr uint64_t kTagBase = 0x7765667400000000ull;  // "weft" | tag
constexpr size_t kCqBatch = 16;
constexpr size_t kMaxAddrLen = 256;
constexpr int kRawMaxRecvs = 8;
constexpr long kGroupPostTries = 1L << 24;  // then the provider is stuck: fail

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

struct RawRequest;

// fi_context2 first: the provider owns it while the operation is pending
// (FI_CONTEXT/FI_CONTEXT2 mode) and hands it back as op_context.
struct SubOp {
  fi_context2 ctx;
  RawRequest* owner = nullptr;
  int index = 0;
};

struct RawRequest {
  SubOp ops[kRawMaxRecvs];
  int sizes[kRawMaxRecvs] = {};
  int n = 1;
  int pending = 0;
  RawRequest* next_free = nullptr;
};

struct RawMr {
  FidPtr<fid_mr> mr;
  void* desc = nullptr;
  char* base = nullptr;
  uint64_t key = 0;
};

// Where the peer's receive arena of one comm lives (write mode).
struct RemoteRegion {
  uint64_t addr;
  uint64_t key;
};

// A fixed ring of T (capacity set once, no allocation when used).
template <class T>
class Ring {
 public:
  void reset(size_t capacity) { items_.assign(capacity, T{}); }
  bool empty() const { return count_ == 0; }
  void push(T v) {
    // Writes that land before their receive is posted are not bounded by
    // the sender's window (the device completes a write without the peer):
    // grow, as a provider's unexpected-message queue does.
    if (count_ == items_.size()) grow();
    items_[(head_ + count_) % items_.size()] = v;
    ++count_;
  }
  T pop() {
    T v = items_[head_];
    head_ = (head_ + 1) % items_.size();
    --count_;
    return v;
  }

 private:
  void grow() {
    std::vector<T> bigger(std::max<size_t>(16, 2 * items_.size()));
    for (size_t i = 0; i < count_; ++i) bigger[i] = items_[(head_ + i) % items_.size()];
    items_.swap(bigger);
    head_ = 0;
  }

  std::vector<T> items_;
  size_t head_ = 0;
  size_t count_ = 0;
};

struct RawComm {
  bool counts_signals = false;  // one-sided: remote CQ data is a signal
  uint64_t signals = 0;
  FidPtr<fid_domain> domain;
  FidPtr<fid_cq> cq;
  FidPtr<fid_av> av;
  FidPtr<fid_ep> ep;  // closed first: declared last of the fids
  fi_addr_t peer = FI_ADDR_UNSPEC;
  std::vector<RawRequest> requests;
  RawRequest* free = nullptr;
  // Write mode: receives waiting for a write, writes that came first.
  Ring<RawRequest*> waiting;
  Ring<int> arrived;
  char* send_base = nullptr;
  RemoteRegion remote{0, 0};
  uint64_t next_key = 1;
};

class RawOfiBackend final : public Backend {
 public:
  explicit RawOfiBackend(const Options& opts)
      : opts_(opts),
        provider_(opts.raw() ? opts.raw_provider : opts.vs_raw_provider),
        one_sided_(opts.runs_one_sided()) {
    InfoPtr hints(fi_allocinfo());
    if (!hints) throw PerfError("raw-ofi: fi_allocinfo failed");
    // Write mode asks no tags: efa's efa-direct fabric (the device itself)
    // offers RMA writes but refuses FI_TAGGED.
    hints->caps = write_mode() ? FI_MSG | FI_RMA | FI_WRITE | FI_REMOTE_WRITE : FI_TAGGED;
    if (one_sided_) hints->caps |= FI_READ | FI_REMOTE_READ;
    hints->ep_attr->type = FI_EP_RDM;
    hints->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY;
    hints->mode = FI_CONTEXT | FI_CONTEXT2;
    // One thread drives each endpoint: skip the provider's internal locking
    // (as fabtests do), or locks would count against the provider ceiling.
    hints->domain_attr->threading = FI_THREAD_DOMAIN;
    hints->fabric_attr->prov_name = strdup(provider_.c_str());
    if (!opts.domain.empty()) hints->domain_attr->name = strdup(opts.domain.c_str());
    if (!opts.fabric.empty()) hints->fabric_attr->name = strdup(opts.fabric.c_str());

    fi_info* found = nullptr;
    auto query = [&] {
      return fi_getinfo(FI_VERSION(FI_MAJOR_VERSION, FI_MINOR_VERSION), nullptr, nullptr, 0,
                        hints.get(), &found);
    };
    int rc = -FI_ENODATA;
    if (one_sided_) {
      hints->tx_attr->msg_order = FI_ORDER_WAW;
      hints->rx_attr->msg_order = FI_ORDER_WAW;
      rc = query();
      ordered_writes_ = rc == 0 && found != nullptr;
      hints->tx_attr->msg_order = 0;
      hints->rx_attr->msg_order = 0;
    }
    if (!ordered_writes_) rc = query();
    if (rc != 0 || found == nullptr) {
      throw PerfError("raw-ofi: no FI_EP_RDM endpoint with " +
                      std::string(write_mode() ? "FI_RMA writes" : "FI_TAGGED") +
                      " from provider '" + provider_ + "'" +
                      (opts.fabric.empty() ? "" : " in fabric '" + opts.fabric + "'") +
                      (opts.domain.empty() ? "" : " in domain '" + opts.domain + "'") + ": " +
                      fi_strerror(-rc) + " (check `fi_info -p " + provider_ + " -t FI_EP_RDM`)");
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
        throw PerfError("raw-ofi: provider '" + provider_ + "' has no domain '" + opts.domain +
                        "' (domains:" + seen.substr(0, seen.size() - 1) + ")");
      }
    }
    info_.reset(fi_dupinfo(chosen));
    if (!info_) throw PerfError("raw-ofi: fi_dupinfo failed");
    if (one_sided_ && !ordered_writes_) info_->tx_attr->op_flags |= FI_DELIVERY_COMPLETE;
    need_mr_ = (info_->domain_attr->mr_mode & FI_MR_LOCAL) != 0;
    prov_key_ = (info_->domain_attr->mr_mode & FI_MR_PROV_KEY) != 0;
    virt_addr_ = (info_->domain_attr->mr_mode & FI_MR_VIRT_ADDR) != 0;
    inject_bytes_ = info_->tx_attr->inject_size;

    fid_fabric* fabric = nullptr;
    check("fi_fabric", fi_fabric(info_->fabric_attr, &fabric, nullptr));
    fabric_.reset(fabric);
  }

  ~RawOfiBackend() override {
    window_mr_.reset();
    comms_.clear();  // endpoints and domains before the fabric
  }

  Facts describe() const override {
    const char* operation = one_sided_     ? "fi_write/fi_read/fi_writedata"
                            : write_mode() ? "fi_writedata"
                                           : "fi_tsend/fi_trecv";
    Facts facts{{"transport", "raw-ofi"},
                {"provider", info_->fabric_attr->prov_name ? info_->fabric_attr->prov_name : "?"},
                {"fabric", info_->fabric_attr->name ? info_->fabric_attr->name : "?"},
                {"domain", info_->domain_attr->name ? info_->domain_attr->name : "?"},
                {"operation", operation},
                {"inject_bytes", std::to_string(write_mode() ? 0 : inject_bytes_)},
                {"mr_local", need_mr_ ? "yes" : "no"}};
    if (one_sided_) {
      facts.emplace_back("write_order",
                         ordered_writes_ ? "FI_ORDER_WAW" : "none (FI_DELIVERY_COMPLETE)");
    }
    return facts;
  }

  std::string label() const override {
    return std::string("raw-ofi ") +
           (info_->fabric_attr->prov_name ? info_->fabric_attr->prov_name : "?") +
           (one_sided_     ? " rma"
            : write_mode() ? " write"
                           : "") +
           " (" + (info_->domain_attr->name ? info_->domain_attr->name : "?") + ")";
  }

  size_t max_message_bytes() const override { return info_->ep_attr->max_msg_size; }
  int max_recvs() const override { return write_mode() ? 1 : kRawMaxRecvs; }

  void connect(Bootstrap& boot, int comms) override {
    const size_t n = static_cast<size_t>(comms);
    comms_.clear();
    local_recv_regions_.assign(n, RegionInfo{});
    std::vector<char> names(n * kMaxAddrLen);
    for (size_t i = 0; i < n; ++i) {
      comms_.push_back(open_comm());
      size_t len = kMaxAddrLen - 2;  // two bytes of length in front
      check("fi_getname", fi_getname(&comms_[i]->ep->fid, &names[i * kMaxAddrLen + 2], &len));
      names[i * kMaxAddrLen] = static_cast<char>(len & 0xff);
      names[i * kMaxAddrLen + 1] = static_cast<char>(len >> 8);
    }
    boot.send(MsgKind::address, names.data(), names.size());
    std::vector<char> peer(n * kMaxAddrLen);
    boot.recv(MsgKind::address, peer.data(), peer.size());
    for (size_t i = 0; i < n; ++i) {
      const char* name = &peer[i * kMaxAddrLen];
      size_t len = static_cast<unsigned char>(name[0]) |
                   (static_cast<size_t>(static_cast<unsigned char>(name[1])) << 8);
      if (len == 0 || len > kMaxAddrLen - 2) {
        throw PerfError("raw-ofi: the peer sent a malformed endpoint name");
      }
      int got = fi_av_insert(comms_[i]->av.get(), name + 2, 1, &comms_[i]->peer, 0, nullptr);
      if (got != 1) {
        throw PerfError("raw-ofi: fi_av_insert of the peer's address failed (" +
                        std::to_string(got) + ")");
      }
    }
  }

  void* register_memory(int comm, Direction dir, void* data, size_t size,
                        MemoryKind kind) override {
    if (kind != MemoryKind::host) throw PerfError("raw-ofi: host memory only (use --mem host)");
    RawComm& c = *comms_[static_cast<size_t>(comm)];
    if (dir == Direction::send) c.send_base = static_cast<char*>(data);
    bool remote = write_mode() && dir == Direction::recv;
    if (!need_mr_ && !remote) return nullptr;
    auto mr = std::make_unique<RawMr>();
    uint64_t access = dir == Direction::send ? FI_SEND | (write_mode() ? FI_WRITE : 0)
                                             : FI_RECV | (remote ? FI_REMOTE_WRITE : 0);
    fid_mr* raw = nullptr;
    uint64_t requested = c.next_key++;
    check("fi_mr_reg",
          fi_mr_reg(c.domain.get(), data, size, access, 0, requested, 0, &raw, nullptr));
    mr->mr.reset(raw);
    mr->desc = fi_mr_desc(raw);
    mr->base = static_cast<char*>(data);
    mr->key = prov_key_ ? fi_mr_key(raw) : requested;
    if (remote) local_recv_regions_[static_cast<size_t>(comm)] = RegionInfo{mr->base, mr->key};
    return mr.release();
  }

  void deregister_memory(int, Direction, void* handle) noexcept override {
    delete static_cast<RawMr*>(handle);
  }

  void exchange_regions(Bootstrap& boot) override {
    if (!write_mode()) return;
    std::vector<RemoteRegion> mine(comms_.size());
    for (size_t i = 0; i < comms_.size(); ++i) {
      const RegionInfo& r = local_recv_regions_[i];
      mine[i] = RemoteRegion{virt_addr_ ? reinterpret_cast<uint64_t>(r.base) : 0, r.key};
    }
    boot.send(MsgKind::address, mine.data(), mine.size() * sizeof(RemoteRegion));
    std::vector<RemoteRegion> theirs(comms_.size());
    boot.recv(MsgKind::address, theirs.data(), theirs.size() * sizeof(RemoteRegion));
    for (size_t i = 0; i < comms_.size(); ++i) comms_[i]->remote = theirs[i];
  }

  void* post_send(int comm, void* data, size_t size, int tag, void* mr) override {
    RawComm& c = *comms_[static_cast<size_t>(comm)];
    RawRequest* r = acquire(c, 1);
    if (r == nullptr) return nullptr;
    r->sizes[0] = static_cast<int>(size);
    ssize_t rc;
    if (write_mode()) {
      uint64_t offset = static_cast<uint64_t>(static_cast<char*>(data) - c.send_base);
      rc = fi_writedata(c.ep.get(), data, size, desc(mr), size, c.peer, c.remote.addr + offset,
                        c.remote.key, &r->ops[0].ctx);
    } else if (size <= inject_bytes_) {
      // Buffered by the provider and complete at once, no CQ entry: what
      // a tuned application (and weft) does with small messages.
      rc = fi_tinject(c.ep.get(), data, size, c.peer, kTagBase | static_cast<uint32_t>(tag));
      if (rc == 0) r->pending = 0;
      return posted(c, r, rc, "fi_tinject");
    } else {
      rc = fi_tsend(c.ep.get(), data, size, desc(mr), c.peer, kTagBase | static_cast<uint32_t>(tag),
                    &r->ops[0].ctx);
    }
    return posted(c, r, rc, write_mode() ? "fi_writedata" : "fi_tsend");
  }

  void* post_recv(int comm, int n, void** data, size_t* sizes, int* tags, void** mrs) override {
    RawComm& c = *comms_[static_cast<size_t>(comm)];
    if (n < 1 || n > max_recvs()) {
      throw PerfError("raw-ofi: a receive group of " + std::to_string(n) + " (at most " +
                      std::to_string(max_recvs()) + ")");
    }
    RawRequest* r = acquire(c, n);
    if (r == nullptr) return nullptr;
    if (write_mode()) {
      if (!c.arrived.empty()) {
        r->sizes[0] = c.arrived.pop();
        r->pending = 0;
      } else {
        c.waiting.push(r);
      }
      return r;
    }
    for (int i = 0; i < n; ++i) {
      r->sizes[i] = static_cast<int>(sizes[i]);
      auto post = [&] {
        return fi_trecv(c.ep.get(), data[i], sizes[i], desc(mrs[i]), c.peer,
                        kTagBase | static_cast<uint32_t>(tags[i]), 0, &r->ops[i].ctx);
      };
      ssize_t rc = post();
      if (rc != 0 && i == 0) return posted(c, r, rc, "fi_trecv");
      // Part of the group is posted and cannot be withdrawn: finish posting
      // it, driving progress so the provider frees its queue (as weft does).
      for (long tries = 0; rc == -FI_EAGAIN && tries < kGroupPostTries; ++tries) {
        progress(c);
        rc = post();
      }
      check("fi_trecv (rest of a grouped receive)", rc);
    }
    return r;
  }

  bool test(int comm, void* request, int* sizes) override {
    RawComm& c = *comms_[static_cast<size_t>(comm)];
    auto* r = static_cast<RawRequest*>(request);
    if (r->pending != 0) progress(c);
    if (r->pending != 0) return false;
    for (int i = 0; i < r->n; ++i) sizes[i] = r->sizes[i];
    release(c, r);
    return true;
  }

  void open_window(Bootstrap& boot, int, char* data, size_t size) override {
    RawComm& c = *comms_.at(0);
    fid_mr* raw = nullptr;
    const uint64_t requested = c.next_key++;
    check("fi_mr_reg (window)", fi_mr_reg(c.domain.get(), data, size,
                                          FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE, 0,
                                          requested, 0, &raw, nullptr));
    window_mr_ = std::make_unique<RawMr>();
    window_mr_->mr.reset(raw);
    window_mr_->desc = fi_mr_desc(raw);
    window_mr_->base = data;
    window_mr_->key = prov_key_ ? fi_mr_key(raw) : requested;
    RemoteRegion mine{virt_addr_ ? reinterpret_cast<uint64_t>(data) : 0, window_mr_->key};
    boot.send_pod(MsgKind::address, mine);
    remote_window_ = boot.recv_pod<RemoteRegion>(MsgKind::address);
    c.counts_signals = true;
  }

  void close_window() noexcept override { window_mr_.reset(); }

  void* post_put(size_t local, size_t remote, size_t size, bool signal) override {
    RawComm& c = *comms_[0];
    RawRequest* r = acquire(c, 1);
    if (r == nullptr) return nullptr;
    char* from = window_mr_->base + local;
    const uint64_t to = remote_window_.addr + remote;
    ssize_t rc = signal ? fi_writedata(c.ep.get(), from, size, window_mr_->desc, 1, c.peer, to,
                                       remote_window_.key, &r->ops[0].ctx)
                        : fi_write(c.ep.get(), from, size, window_mr_->desc, c.peer, to,
                                   remote_window_.key, &r->ops[0].ctx);
    return posted(c, r, rc, signal ? "fi_writedata" : "fi_write");
  }

  void* post_get(size_t local, size_t remote, size_t size) override {
    RawComm& c = *comms_[0];
    RawRequest* r = acquire(c, 1);
    if (r == nullptr) return nullptr;
    ssize_t rc = fi_read(c.ep.get(), window_mr_->base + local, size, window_mr_->desc, c.peer,
                         remote_window_.addr + remote, remote_window_.key, &r->ops[0].ctx);
    return posted(c, r, rc, "fi_read");
  }

  bool test_one_sided(void* request) override {
    int sizes[kRawMaxRecvs];
    return test(0, request, sizes);
  }

  uint64_t signals_arrived() override {
    RawComm& c = *comms_[0];
    progress(c);
    return c.signals;
  }

 private:
  struct RegionInfo {
    char* base = nullptr;
    uint64_t key = 0;
  };

  bool write_mode() const { return opts_.raw_op == RawOp::write || one_sided_; }
  static void* desc(void* mr) { return mr != nullptr ? static_cast<RawMr*>(mr)->desc : nullptr; }

  static size_t plugin_cq_size() {
    Params params;
    std::string error;
    if (!load_params(params, error)) return 0;  // the plugin run reports it
    return static_cast<size_t>(params.ofi_cq_size);
  }

  void check(const char* what, ssize_t rc) const {
    if (rc != 0) throw PerfError("raw-ofi " + provider_ + ": " + fi_error(what, rc));
  }

  std::unique_ptr<RawComm> open_comm() {
    auto c = std::make_unique<RawComm>();
    fid_domain* domain = nullptr;
    check("fi_domain", fi_domain(fabric_.get(), info_.get(), &domain, nullptr));
    c->domain.reset(domain);
    // Room for every request we may have outstanding, both directions.
    size_t pool = 2 * static_cast<size_t>(opts_.depth) + 16;
    fi_cq_attr cq_attr{};
    // Writes need no tags, and efa-direct offers no tagged entry format.
    cq_attr.format = write_mode() ? FI_CQ_FORMAT_DATA : FI_CQ_FORMAT_TAGGED;
    cq_attr.wait_obj = FI_WAIT_NONE;
    // At least as deep as the plugin's (WEFT_OFI_CQ_SIZE, as weft reads it):
    // a provider's queue is memory touched for the first time as
    // completions fill it, which costs the first pass page faults. Runs
    // compared side by side pay that alike.
    cq_attr.size = std::max(pool * kRawMaxRecvs, plugin_cq_size());
    fid_cq* cq = nullptr;
    check("fi_cq_open", fi_cq_open(c->domain.get(), &cq_attr, &cq, nullptr));
    c->cq.reset(cq);
    fi_av_attr av_attr{};
    av_attr.type = FI_AV_TABLE;
    av_attr.count = 4;
    fid_av* av = nullptr;
    check("fi_av_open", fi_av_open(c->domain.get(), &av_attr, &av, nullptr));
    c->av.reset(av);
    fid_ep* ep = nullptr;
    check("fi_endpoint", fi_endpoint(c->domain.get(), info_.get(), &ep, nullptr));
    c->ep.reset(ep);
    check("fi_ep_bind(av)", fi_ep_bind(c->ep.get(), &c->av->fid, 0));
    check("fi_ep_bind(cq)", fi_ep_bind(c->ep.get(), &c->cq->fid, FI_TRANSMIT | FI_RECV));
    check("fi_enable", fi_enable(c->ep.get()));
    c->requests.resize(pool);
    for (auto& r : c->requests) {
      for (int i = 0; i < kRawMaxRecvs; ++i) r.ops[i] = SubOp{{}, &r, i};
      release(*c, &r);
    }
    c->waiting.reset(pool);
    c->arrived.reset(pool);
    return c;
  }

  static RawRequest* acquire(RawComm& c, int n) {
    RawRequest* r = c.free;
    if (r != nullptr) {
      c.free = r->next_free;
      r->n = n;
      r->pending = n;
    }
    return r;
  }
  static void release(RawComm& c, RawRequest* r) {
    r->next_free = c.free;
    c.free = r;
  }

  void* posted(RawComm& c, RawRequest* r, ssize_t rc, const char* what) {
    if (rc == 0) return r;
    release(c, r);
    if (rc == -FI_EAGAIN) {
      progress(c);  // the provider needs progress to free its queue
      return nullptr;
    }
    check(what, rc);
    return nullptr;
  }

  void progress(RawComm& c) {
    if (write_mode()) {
      drain<fi_cq_data_entry>(c);
    } else {
      drain<fi_cq_tagged_entry>(c);
    }
  }

  // Entry: the CQ's format (fi_cq_data_entry or fi_cq_tagged_entry).
  template <typename Entry>
  void drain(RawComm& c) {
    Entry entries[kCqBatch];
    for (;;) {
      ssize_t n = fi_cq_read(c.cq.get(), entries, kCqBatch);
      if (n == -FI_EAGAIN) return;
      if (n == -FI_EAVAIL) report_cq_error(c);
      if (n < 0) check("fi_cq_read", n);
      for (ssize_t i = 0; i < n; ++i) complete(c, entries[i]);
      if (static_cast<size_t>(n) < kCqBatch) return;
    }
  }

  template <typename Entry>
  static void complete(RawComm& c, const Entry& e) {
    if ((e.flags & FI_REMOTE_CQ_DATA) != 0 && (e.flags & FI_RECV) == 0 && c.counts_signals) {
      ++c.signals;
      return;
    }
    if ((e.flags & FI_REMOTE_CQ_DATA) != 0 && (e.flags & FI_RECV) == 0) {
      // A peer's write landed: it completes our oldest waiting receive.
      int size = static_cast<int>(e.data);
      if (c.waiting.empty()) {
        c.arrived.push(size);
      } else {
        RawRequest* r = c.waiting.pop();
        r->sizes[0] = size;
        r->pending = 0;
      }
      return;
    }
    auto* op = static_cast<SubOp*>(e.op_context);
    RawRequest* r = op->owner;
    if ((e.flags & FI_RECV) != 0) r->sizes[op->index] = static_cast<int>(e.len);
    --r->pending;
  }

  [[noreturn]] void report_cq_error(RawComm& c) {
    fi_cq_err_entry err{};
    ssize_t rc = fi_cq_readerr(c.cq.get(), &err, 0);
    if (rc < 0) check("fi_cq_readerr", rc);
    const char* detail = fi_cq_strerror(c.cq.get(), err.prov_errno, err.err_data, nullptr, 0);
    throw PerfError("raw-ofi " + provider_ + ": operation failed: " + fi_strerror(err.err) + " (" +
                    (detail ? detail : "") + ")" +
                    (err.err == FI_ETRUNC ? ": message larger than the posted receive"
                                          : ": the peer may have died"));
  }

  const Options& opts_;
  std::string provider_;
  InfoPtr info_;
  FidPtr<fid_fabric> fabric_;
  bool need_mr_ = false;
  bool prov_key_ = false;
  bool virt_addr_ = false;
  size_t inject_bytes_ = 0;
  std::vector<RegionInfo> local_recv_regions_;
  // One-sided tests.
  bool one_sided_ = false;
  bool ordered_writes_ = false;
  std::unique_ptr<RawMr> window_mr_;
  RemoteRegion remote_window_{0, 0};
  std::vector<std::unique_ptr<RawComm>> comms_;
};

}  // namespace

std::unique_ptr<Backend> make_raw_ofi_backend(const Options& opts) {
  return std::make_unique<RawOfiBackend>(opts);
}

}  // namespace weft::perf
