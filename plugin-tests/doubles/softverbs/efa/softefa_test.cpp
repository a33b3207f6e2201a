// softefa.unit: the EFA personality against what an EFA device does, through
// efadv_* and the extended verbs libfabric uses, with bytes checked. Two SRD
// QPs of one process (the NIC's loopback), on separate PDs so that address
// handles are the receiver's own. Linked directly against softefa.
#include <endian.h>
#include <infiniband/efadv.h>
#include <infiniband/verbs.h>
#include <stdlib.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <set>
#include <string>
#include <vector>

#include "efa/efa.h"
#include "softverbs.h"

namespace {

namespace efa = softverbs::efa;

struct Env {
  std::vector<std::string> names;
  void set(const char* name, const char* value) {
    setenv(name, value, 1);
    names.emplace_back(name);
  }
  ~Env() {
    for (const auto& n : names) unsetenv(n.c_str());
  }
};

struct Completion {
  uint64_t wr_id = 0;
  ibv_wc_status status = IBV_WC_SUCCESS;
  ibv_wc_opcode opcode = IBV_WC_SEND;
  uint32_t vendor_err = 0;
  uint32_t byte_len = 0;
  uint32_t imm = 0;
  uint32_t src_qp = 0;
  uint32_t slid = 0;
  unsigned flags = 0;
  bool unsolicited = false;
  bool has_sgid = false;
  ibv_gid sgid{};
};

// One SRD QP with its own PD and CQ (made by efadv_create_cq).
struct Side {
  ibv_pd* pd = nullptr;
  ibv_cq_ex* cq = nullptr;
  ibv_qp* qp = nullptr;
  ibv_qp_ex* qpx = nullptr;
  uint32_t qkey = 0;
};

struct Device {
  ibv_context* ctx = nullptr;
  ibv_gid gid{};
  Side a, b;

  explicit Device(bool unsolicited_b = false, uint8_t rnr_retry = 7) {
    int n = 0;
    ibv_device** list = ibv_get_device_list(&n);
    REQUIRE(n >= 1);
    ctx = ibv_open_device(list[0]);
    ibv_free_device_list(list);
    REQUIRE(ctx != nullptr);
    REQUIRE(ibv_query_gid(ctx, 1, 0, &gid) == 0);
    make(a, 0x1111, false, rnr_retry);
    make(b, 0x2222, unsolicited_b, rnr_retry);
  }

  void make(Side& s, uint32_t qkey, bool unsolicited, uint8_t rnr_retry) {
    s.pd = ibv_alloc_pd(ctx);
    REQUIRE(s.pd != nullptr);
    ibv_cq_init_attr_ex cq_attr{};
    cq_attr.cqe = 256;
    cq_attr.wc_flags = IBV_WC_STANDARD_FLAGS;
    efadv_cq_init_attr dv{};
    dv.wc_flags = efa::kWcWithSgid | (unsolicited ? efa::kWcWithIsUnsolicited : 0);
    s.cq = efadv_create_cq(ctx, &cq_attr, &dv, sizeof(dv));
    REQUIRE(s.cq != nullptr);
    ibv_qp_init_attr_ex init{};
    init.send_cq = ibv_cq_ex_to_cq(s.cq);
    init.recv_cq = ibv_cq_ex_to_cq(s.cq);
    init.cap = {128, 128, 2, 3, 32};
    init.qp_type = IBV_QPT_DRIVER;
    init.sq_sig_all = 1;
    init.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
    init.pd = s.pd;
    init.send_ops_flags = IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM |
                          IBV_QP_EX_WITH_RDMA_READ | IBV_QP_EX_WITH_RDMA_WRITE |
                          IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM;
    efa::QpInitAttr qp_attr{};
    qp_attr.driver_qp_type = EFADV_QP_DRIVER_TYPE_SRD;
    qp_attr.flags = unsolicited ? efa::kQpFlagUnsolicitedWriteRecv : 0;
    s.qp = efadv_create_qp_ex(ctx, &init, reinterpret_cast<efadv_qp_init_attr*>(&qp_attr),
                              sizeof(qp_attr));
    REQUIRE(s.qp != nullptr);
    s.qpx = ibv_qp_to_qp_ex(s.qp);
    REQUIRE(s.qpx != nullptr);
    s.qkey = qkey;
    ibv_qp_attr attr{};
    attr.qp_state = IBV_QPS_INIT;
    attr.port_num = 1;
    attr.qkey = qkey;
    REQUIRE(ibv_modify_qp(s.qp, &attr,
                          IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY) == 0);
    attr.qp_state = IBV_QPS_RTR;
    REQUIRE(ibv_modify_qp(s.qp, &attr, IBV_QP_STATE) == 0);
    attr.qp_state = IBV_QPS_RTS;
    attr.rnr_retry = rnr_retry;
    REQUIRE(ibv_modify_qp(s.qp, &attr, IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_RNR_RETRY) == 0);
  }

  ibv_ah* ah(ibv_pd* pd) {
    ibv_ah_attr attr{};
    attr.is_global = 1;
    attr.port_num = 1;
    attr.grh.dgid = gid;
    ibv_ah* h = ibv_create_ah(pd, &attr);
    REQUIRE(h != nullptr);
    return h;
  }

  ~Device() {
    for (Side* s : {&a, &b}) {
      ibv_destroy_qp(s->qp);
      ibv_destroy_cq(ibv_cq_ex_to_cq(s->cq));
      ibv_dealloc_pd(s->pd);
    }
    ibv_close_device(ctx);
  }
};

ibv_mr* reg(ibv_pd* pd, std::vector<uint8_t>& buf) {
  ibv_mr* mr =
      ibv_reg_mr(pd, buf.data(), buf.size(),
                 IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
  REQUIRE(mr != nullptr);
  return mr;
}

void post_recv(Side& s, ibv_mr* mr, void* addr, uint32_t len, uint64_t wr_id) {
  ibv_sge sge{reinterpret_cast<uintptr_t>(addr), len, mr->lkey};
  ibv_recv_wr wr{};
  wr.wr_id = wr_id;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  ibv_recv_wr* bad = nullptr;
  REQUIRE(ibv_post_recv(s.qp, &wr, &bad) == 0);
}

// Posts one WR from `from` to `to`'s QP; `op` is called between wr_start and
// the buffers.
template <typename Op>
int post(Side& from, Side& to, ibv_ah* ah, ibv_mr* mr, void* addr, uint32_t len, uint64_t wr_id,
         Op&& op) {
  ibv_wr_start(from.qpx);
  from.qpx->wr_id = wr_id;
  from.qpx->wr_flags = IBV_SEND_SIGNALED;
  op(from.qpx);
  ibv_sge sge{reinterpret_cast<uintptr_t>(addr), len, mr->lkey};
  ibv_wr_set_sge_list(from.qpx, 1, &sge);
  ibv_wr_set_ud_addr(from.qpx, ah, to.qp->qp_num, to.qkey);
  return ibv_wr_complete(from.qpx);
}

std::vector<Completion> poll(Side& s, size_t want) {
  std::vector<Completion> out;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  efadv_cq* dv = efadv_cq_from_ibv_cq_ex(s.cq);
  auto* dv2 = reinterpret_cast<efa::DvCq*>(dv);
  while (out.size() < want && std::chrono::steady_clock::now() < deadline) {
    ibv_poll_cq_attr attr{};
    if (ibv_start_poll(s.cq, &attr) != 0) continue;
    do {
      Completion c;
      c.wr_id = s.cq->wr_id;
      c.status = s.cq->status;
      c.opcode = ibv_wc_read_opcode(s.cq);
      c.vendor_err = ibv_wc_read_vendor_err(s.cq);
      c.byte_len = ibv_wc_read_byte_len(s.cq);
      c.flags = ibv_wc_read_wc_flags(s.cq);
      if (c.flags & IBV_WC_WITH_IMM) c.imm = be32toh(ibv_wc_read_imm_data(s.cq));
      c.src_qp = ibv_wc_read_src_qp(s.cq);
      c.slid = ibv_wc_read_slid(s.cq);
      c.unsolicited = dv2->wc_is_unsolicited(dv);
      c.has_sgid = efadv_wc_read_sgid(dv, &c.sgid) == 0;
      out.push_back(c);
    } while (out.size() < want && ibv_next_poll(s.cq) == 0);
    ibv_end_poll(s.cq);
  }
  REQUIRE(out.size() == want);
  return out;
}

}  // namespace

TEST_CASE("softefa: efadv_query_device reports EFA and its switchable capabilities") {
  Env env;
  SECTION("defaults") {}
  SECTION("RDMA write and unsolicited receive off") {
    env.set("SOFTEFA_RDMA_WRITE", "0");
    env.set("SOFTEFA_UNSOLICITED_WRITE_RECV", "0");
  }
  bool write_on = getenv("SOFTEFA_RDMA_WRITE") == nullptr;
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  REQUIRE(n >= 1);
  ibv_context* ctx = ibv_open_device(list[0]);
  ibv_free_device_list(list);
  ibv_device_attr dattr{};
  REQUIRE(ibv_query_device(ctx, &dattr) == 0);
  CHECK(dattr.vendor_id == 0x1d0f);
  CHECK(dattr.vendor_part_id >= 0xefa1);
  ibv_port_attr pattr{};
  REQUIRE(ibv_query_port(ctx, 1, &pattr) == 0);
  CHECK(pattr.max_msg_sz == 8928);
  efadv_device_attr attr{};
  REQUIRE(efadv_query_device(ctx, &attr, sizeof(attr)) == 0);
  CHECK(attr.max_sq_sge == 2);
  CHECK(attr.inline_buf_size == 32);
  CHECK(attr.max_rdma_size == 1u << 30);
  CHECK((attr.device_caps & efa::kCapRdmaRead) != 0);
  CHECK((attr.device_caps & efa::kCapCqWithSgid) != 0);
  CHECK(((attr.device_caps & efa::kCapRdmaWrite) != 0) == write_on);
  CHECK(((attr.device_caps & efa::kCapUnsolicitedWriteRecv) != 0) == write_on);
  // A QP asking for what the device lacks is refused.
  ibv_pd* pd = ibv_alloc_pd(ctx);
  ibv_cq_init_attr_ex cq_attr{};
  cq_attr.cqe = 16;
  efadv_cq_init_attr dv{};
  dv.wc_flags = efa::kWcWithIsUnsolicited;
  ibv_cq_ex* cq = efadv_create_cq(ctx, &cq_attr, &dv, sizeof(dv));
  CHECK((cq != nullptr) == write_on);
  if (cq == nullptr) cq = ibv_create_cq_ex(ctx, &cq_attr);
  REQUIRE(cq != nullptr);
  ibv_qp_init_attr_ex init{};
  init.send_cq = init.recv_cq = ibv_cq_ex_to_cq(cq);
  init.cap = {16, 16, 1, 1, 0};
  init.qp_type = IBV_QPT_DRIVER;
  init.sq_sig_all = 1;
  init.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
  init.pd = pd;
  init.send_ops_flags = IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_RDMA_WRITE;
  efadv_qp_init_attr qa{};
  qa.driver_qp_type = EFADV_QP_DRIVER_TYPE_SRD;
  ibv_qp* qp = efadv_create_qp_ex(ctx, &init, &qa, sizeof(qa));
  CHECK((qp != nullptr) == write_on);
  if (qp != nullptr) ibv_destroy_qp(qp);
  ibv_destroy_cq(ibv_cq_ex_to_cq(cq));
  ibv_dealloc_pd(pd);
  ibv_close_device(ctx);
}

TEST_CASE("softefa: sends name their sender by the receiver's AH, or by GID") {
  Device d;
  std::vector<uint8_t> src(4096), dst(4096);
  ibv_mr* smr = reg(d.a.pd, src);
  ibv_mr* rmr = reg(d.b.pd, dst);
  ibv_ah* to_b = d.ah(d.a.pd);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<uint8_t>(i * 7 + 1);

  post_recv(d.b, rmr, dst.data(), 4096, 1);
  REQUIRE(post(d.a, d.b, to_b, smr, src.data(), 3000, 11,
               [](ibv_qp_ex* q) { ibv_wr_send_imm(q, htobe32(0xabc)); }) == 0);
  auto sent = poll(d.a, 1);
  CHECK(sent[0].status == IBV_WC_SUCCESS);
  CHECK(sent[0].opcode == IBV_WC_SEND);
  auto got = poll(d.b, 1);
  CHECK(got[0].wr_id == 1);
  CHECK(got[0].opcode == IBV_WC_RECV);
  CHECK(got[0].byte_len == 3000);
  CHECK(got[0].imm == 0xabc);
  CHECK(got[0].src_qp == d.a.qp->qp_num);
  // B's PD has no AH to A's GID: unknown sender, GID readable.
  CHECK(got[0].slid == 0xffff);
  REQUIRE(got[0].has_sgid);
  CHECK(std::memcmp(got[0].sgid.raw, d.gid.raw, 16) == 0);
  CHECK(std::memcmp(dst.data(), src.data(), 3000) == 0);

  // Once B has an AH to that GID, completions name it.
  ibv_ah* to_a = d.ah(d.b.pd);
  efadv_ah_attr ah_attr{};
  REQUIRE(efadv_query_ah(to_a, &ah_attr, sizeof(ah_attr)) == 0);
  post_recv(d.b, rmr, dst.data(), 4096, 2);
  REQUIRE(post(d.a, d.b, to_b, smr, src.data(), 10, 12, [](ibv_qp_ex* q) { ibv_wr_send(q); }) == 0);
  poll(d.a, 1);
  got = poll(d.b, 1);
  CHECK(got[0].slid == ah_attr.ahn);
  CHECK_FALSE(got[0].has_sgid);
  ibv_destroy_ah(to_a);
  ibv_destroy_ah(to_b);
  ibv_dereg_mr(smr);
  ibv_dereg_mr(rmr);
}

TEST_CASE("softefa: RDMA read, write and write with immediate, solicited and not") {
  bool unsolicited = GENERATE(false, true);
  CAPTURE(unsolicited);
  Device d(unsolicited);
  std::vector<uint8_t> local(1 << 20), remote(1 << 20);
  ibv_mr* lmr = reg(d.a.pd, local);
  ibv_mr* rmr = reg(d.b.pd, remote);
  ibv_ah* to_b = d.ah(d.a.pd);
  for (size_t i = 0; i < remote.size(); ++i) remote[i] = static_cast<uint8_t>(i ^ (i >> 9));
  uint64_t raddr = reinterpret_cast<uintptr_t>(remote.data());

  REQUIRE(post(d.a, d.b, to_b, lmr, local.data(), 1 << 20, 1,
               [&](ibv_qp_ex* q) { ibv_wr_rdma_read(q, rmr->rkey, raddr); }) == 0);
  auto c = poll(d.a, 1);
  CHECK(c[0].status == IBV_WC_SUCCESS);
  CHECK(c[0].opcode == IBV_WC_RDMA_READ);
  CHECK(local == remote);

  for (size_t i = 0; i < local.size(); ++i) local[i] = static_cast<uint8_t>(i * 13);
  if (!unsolicited) post_recv(d.b, rmr, nullptr, 0, 77);
  REQUIRE(post(d.a, d.b, to_b, lmr, local.data(), 65536, 2, [&](ibv_qp_ex* q) {
            ibv_wr_rdma_write_imm(q, rmr->rkey, raddr + 4096, htobe32(5));
          }) == 0);
  c = poll(d.a, 1);
  CHECK(c[0].status == IBV_WC_SUCCESS);
  CHECK(c[0].opcode == IBV_WC_RDMA_WRITE);
  auto r = poll(d.b, 1);
  CHECK(r[0].opcode == IBV_WC_RECV_RDMA_WITH_IMM);
  CHECK(r[0].imm == 5);
  CHECK(r[0].unsolicited == unsolicited);
  CHECK(r[0].wr_id == (unsolicited ? 0u : 77u));
  CHECK(std::memcmp(remote.data() + 4096, local.data(), 65536) == 0);
  ibv_destroy_ah(to_b);
  ibv_dereg_mr(lmr);
  ibv_dereg_mr(rmr);
}

TEST_CASE("softefa: error completions carry EFA's statuses; the QP carries on") {
  Env env;
  env.set("SOFTEFA_RNR_BACKOFF_US", "10");
  Device d(false, 1);  // one RNR retry
  std::vector<uint8_t> buf(16384), dst(16384);
  ibv_mr* mr = reg(d.a.pd, buf);
  ibv_mr* rmr = reg(d.b.pd, dst);
  ibv_ah* to_b = d.ah(d.a.pd);
  softverbs_counters before{}, after{};
  softverbs_get_counters(&before);

  // No receive posted: RNR, retried once, then REMOTE_ERROR_RNR (10).
  REQUIRE(post(d.a, d.b, to_b, mr, buf.data(), 8, 1, [](ibv_qp_ex* q) { ibv_wr_send(q); }) == 0);
  auto c = poll(d.a, 1);
  CHECK(c[0].status == IBV_WC_RNR_RETRY_EXC_ERR);
  CHECK(c[0].vendor_err == 10);
  softverbs_get_counters(&after);
  CHECK(after.rnr_naks_received - before.rnr_naks_received == 2);

  // Longer than the MTU: LOCAL_ERROR_BAD_LENGTH (6).
  REQUIRE(post(d.a, d.b, to_b, mr, buf.data(), 9000, 2, [](ibv_qp_ex* q) { ibv_wr_send(q); }) == 0);
  c = poll(d.a, 1);
  CHECK(c[0].status == IBV_WC_LOC_LEN_ERR);
  CHECK(c[0].vendor_err == 6);

  // A bad rkey: REMOTE_ERROR_BAD_ADDRESS (7).
  REQUIRE(post(d.a, d.b, to_b, mr, buf.data(), 64, 3, [&](ibv_qp_ex* q) {
            ibv_wr_rdma_write(q, rmr->rkey ^ 0x5a5a, reinterpret_cast<uintptr_t>(dst.data()));
          }) == 0);
  c = poll(d.a, 1);
  CHECK(c[0].status == IBV_WC_REM_ACCESS_ERR);
  CHECK(c[0].vendor_err == 7);

  // Bigger than the receive: REMOTE_ERROR_BAD_LENGTH (11), the receive fails.
  post_recv(d.b, rmr, dst.data(), 100, 9);
  REQUIRE(post(d.a, d.b, to_b, mr, buf.data(), 200, 4, [](ibv_qp_ex* q) { ibv_wr_send(q); }) == 0);
  c = poll(d.a, 1);
  CHECK(c[0].vendor_err == 11);
  auto r = poll(d.b, 1);
  CHECK(r[0].status == IBV_WC_LOC_LEN_ERR);

  // Still in RTS: the next send goes through.
  post_recv(d.b, rmr, dst.data(), 100, 10);
  REQUIRE(post(d.a, d.b, to_b, mr, buf.data(), 50, 5, [](ibv_qp_ex* q) { ibv_wr_send(q); }) == 0);
  CHECK(poll(d.a, 1)[0].status == IBV_WC_SUCCESS);
  CHECK(poll(d.b, 1)[0].byte_len == 50);
  ibv_destroy_ah(to_b);
  ibv_dereg_mr(mr);
  ibv_dereg_mr(rmr);
}

TEST_CASE("softefa: completions of one QP may overtake each other (SOFTVERBS_REORDER)") {
  Env env;
  env.set("SOFTVERBS_REORDER", "8");
  env.set("SOFTVERBS_REORDER_SEED", "3");
  Device d;
  constexpr int kCount = 64;
  std::vector<uint8_t> src(kCount * 64), dst(kCount * 64);
  ibv_mr* smr = reg(d.a.pd, src);
  ibv_mr* rmr = reg(d.b.pd, dst);
  ibv_ah* to_b = d.ah(d.a.pd);
  for (int i = 0; i < kCount; ++i) post_recv(d.b, rmr, dst.data() + i * 64, 64, 1000 + i);
  for (int i = 0; i < kCount; ++i) {
    std::memset(src.data() + i * 64, i, 64);
    REQUIRE(post(d.a, d.b, to_b, smr, src.data() + i * 64, 64, i,
                 [](ibv_qp_ex* q) { ibv_wr_send(q); }) == 0);
  }
  auto sent = poll(d.a, kCount);
  auto got = poll(d.b, kCount);
  std::set<uint64_t> ids;
  bool reordered = false;
  for (int i = 0; i < kCount; ++i) {
    ids.insert(got[i].wr_id);
    reordered = reordered || got[i].wr_id != static_cast<uint64_t>(1000 + i) ||
                sent[i].wr_id != static_cast<uint64_t>(i);
    // Whatever the order, each receive holds one whole message.
    uint64_t slot = got[i].wr_id - 1000;
    uint8_t first = dst[slot * 64];
    for (int j = 0; j < 64; ++j) REQUIRE(dst[slot * 64 + j] == first);
  }
  CHECK(ids.size() == kCount);
  CHECK(reordered);
  ibv_destroy_ah(to_b);
  ibv_dereg_mr(smr);
  ibv_dereg_mr(rmr);
}

TEST_CASE("softefa: 128-byte in-order placement is reported only when switched on") {
  Env env;
  bool on = GENERATE(false, true);
  if (on) env.set("SOFTEFA_IN_ORDER_128", "1");
  Device d;
  int caps = ibv_query_qp_data_in_order(d.a.qp, IBV_WR_RDMA_WRITE, 1 /* RETURN_CAPS */);
  CHECK(caps == (on ? 2 : 0));
}

TEST_CASE("softefa: a link that goes down fails WRs with EFA's unresponsive-remote status") {
  Env env;
  env.set("SOFTVERBS_FAULT_LINK_DOWN", "1");
  env.set("SOFTVERBS_RETRY_MS", "100");
  Device d;
  std::vector<uint8_t> src(64), dst(64);
  ibv_mr* smr = reg(d.a.pd, src);
  ibv_mr* rmr = reg(d.b.pd, dst);
  ibv_ah* to_b = d.ah(d.a.pd);
  post_recv(d.b, rmr, dst.data(), 64, 1);
  REQUIRE(post(d.a, d.b, to_b, smr, src.data(), 64, 1, [](ibv_qp_ex* q) { ibv_wr_send(q); }) == 0);
  CHECK(poll(d.a, 1)[0].status == IBV_WC_SUCCESS);
  // The second send WR of the process takes the link down with it.
  REQUIRE(post(d.a, d.b, to_b, smr, src.data(), 64, 2, [](ibv_qp_ex* q) { ibv_wr_send(q); }) == 0);
  auto c = poll(d.a, 1);
  CHECK(c[0].status == IBV_WC_RETRY_EXC_ERR);
  CHECK(c[0].vendor_err == 13);
  ibv_destroy_ah(to_b);
  ibv_dereg_mr(smr);
  ibv_dereg_mr(rmr);
}
