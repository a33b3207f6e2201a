// A device's limits on queue pairs, completion queues, memory regions and
// completion-queue depth (ibv_query_device), lowered in softverbs
// (SOFTVERBS_MAX_QP, _CQ, _MR, _CQE), and libfabric's efa provider's
// mr_cnt over softefa: the comm or registration that would
// pass one fails at once with an error naming the limit and the knob that
// lowers weft's use of it; closing comms gives the objects back, and the
// comms that fit still move their bytes intact.
#include <catch2/catch.hpp>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "log_capture.h"
#include "net_ops.h"
#include "two_rank.h"

using namespace weft;
using namespace weft::ft;

namespace {

struct Pair {
  void* send = nullptr;
  void* recv = nullptr;
};

std::unique_ptr<NetClient> open_with_log() {
  auto c = load_plugin(12);
  FT_OK(c->init(capture_log));
  return c;
}

// Connects one pair over a fresh listen; the first error either side
// returns, or ncclSuccess with both comms.
ncclResult_t try_pair(NetClient& c, int dev, Pair* pair) {
  Handle handle;
  void* lc = do_listen(c, dev, handle);
  ncclResult_t result = ncclSuccess;
  while (result == ncclSuccess && (pair->send == nullptr || pair->recv == nullptr)) {
    if (pair->send == nullptr) result = c.connect(dev, handle.bytes, &pair->send);
    if (result == ncclSuccess && pair->recv == nullptr) result = c.accept(lc, &pair->recv);
    FT_DEADLINE("connecting a pair under lowered device limits");
  }
  FT_OK(c.close_listen(lc));
  if (result != ncclSuccess) {
    if (pair->send != nullptr) FT_OK(c.close_send(pair->send));
    if (pair->recv != nullptr) FT_OK(c.close_recv(pair->recv));
    *pair = {};
  }
  return result;
}

void transfer(NetClient& c, const Pair& pair, uint64_t seed) {
  const size_t n = 256 << 10;
  Buffer sbuf(n), rbuf(n);
  fill_pattern(sbuf.data(), n, seed);
  Mr ms(c, pair.send, sbuf.data(), n), mr(c, pair.recv, rbuf.data(), n);
  void* rreq = post_irecv1(c, pair.recv, rbuf.data(), n, 3, mr.get());
  void* sreq = post_isend(c, pair.send, sbuf.data(), n, 3, ms.get());
  wait_ok(c, sreq, "send under lowered device limits");
  int got = wait_ok(c, rreq, "receive under lowered device limits");
  FT_REQUIRE(got == static_cast<int>(n), "received " << got << " bytes, expected " << n);
  check_received(rbuf.data(), n, n, seed, "receive under lowered device limits");
}

void close_pair(NetClient& c, const Pair& pair) {
  FT_OK(c.close_send(pair.send));
  FT_OK(c.close_recv(pair.recv));
}

void require_logged(const std::string& expected) {
  const std::string log = logged_text(NCCL_LOG_WARN);
  FT_REQUIRE(log.find(expected) != std::string::npos, "no warning says \"" << expected
                                                                           << "\"; warnings:\n"
                                                                           << log);
}

// Pairs until one is refused (each pair takes a queue pair and a
// completion queue on either side); the refusal names the limit; after a
// pair closes, a new one connects; every pair moves its bytes.
void comms_up_to(const char* variable, const char* limit_text, const char* advice) {
  ::setenv(variable, "8", 1);
  auto c = open_with_log();
  const int dev = test_device(*c);
  std::vector<Pair> pairs;
  ncclResult_t refused = ncclSuccess;
  while (refused == ncclSuccess) {
    FT_REQUIRE(pairs.size() < 8, "8 pairs connected with " << variable << "=8");
    Pair pair;
    refused = try_pair(*c, dev, &pair);
    if (refused == ncclSuccess) pairs.push_back(pair);
  }
  FT_REQUIRE(refused == ncclSystemError,
             "the refused pair returned " << result_name(refused) << ", expected ncclSystemError");
  FT_REQUIRE(pairs.size() >= 2, "only " << pairs.size() << " pairs before the limit");
  require_logged(limit_text);
  require_logged(advice);
  for (size_t i = 0; i < pairs.size(); ++i) transfer(*c, pairs[i], pattern_seed(70, i));

  close_pair(*c, pairs.front());
  Pair again;
  FT_OK(try_pair(*c, dev, &again));
  pairs.front() = again;
  for (size_t i = 0; i < pairs.size(); ++i) transfer(*c, pairs[i], pattern_seed(71, i));
  for (const Pair& pair : pairs) close_pair(*c, pair);
  FT_OK(c->finalize());
}

// The limit is the device's max_mr: softverbs' own, or what libfabric's efa
// provider states as mr_cnt over softefa (its own buffers count too, so
// the device may refuse before weft's count reaches it). With
// WEFT_TEST_LAZY_REGISTRATION=1 (the rdma protocol over efa, whose
// clear-to-sends go from a buffer registered on a comm's first receive) a
// receive posted at the limit fails in test() instead of leaving its
// sender waiting unseen.
void registrations_up_to_max_mr() {
  const char* limit_variable = std::getenv("WEFT_TEST_MAX_MR");
  const std::string limit = limit_variable != nullptr ? limit_variable : "8";
  const size_t most = std::stoul(limit);
  const char* lazy = std::getenv("WEFT_TEST_LAZY_REGISTRATION");
  const bool lazy_registration = lazy != nullptr && std::string(lazy) == "1";
  ::setenv("SOFTVERBS_MAX_MR", limit.c_str(), 1);
  auto c = open_with_log();
  const int dev = test_device(*c);
  Pair pair, starved;
  FT_OK(try_pair(*c, dev, &pair));
  const size_t n = 64 << 10;
  Buffer starved_buffer(n);
  if (lazy_registration) FT_OK(try_pair(*c, dev, &starved));
  void* starved_handle = nullptr;
  if (lazy_registration) {
    FT_OK(c->reg_mr(starved.recv, starved_buffer.data(), n, NCCL_PTR_HOST, &starved_handle));
  }
  // Separate allocations: the registration cache shares none of them.
  std::vector<std::unique_ptr<Buffer>> buffers;
  std::vector<void*> handles;
  ncclResult_t refused = ncclSuccess;
  while (refused == ncclSuccess) {
    FT_REQUIRE(handles.size() < most,
               most << " registrations with SOFTVERBS_MAX_MR=" << limit << " besides the comms'");
    buffers.push_back(std::make_unique<Buffer>(n));
    void* handle = nullptr;
    refused = c->reg_mr(pair.recv, buffers.back()->data(), n, NCCL_PTR_HOST, &handle);
    if (refused == ncclSuccess) handles.push_back(handle);
  }
  FT_REQUIRE(refused == ncclSystemError,
             "the refused regMr returned " << result_name(refused) << ", expected ncclSystemError");
  require_logged("allows " + limit + " memory regions (");
  require_logged("WEFT_MR_CACHE=1");
  FT_REQUIRE(handles.size() >= 4, "only " << handles.size() << " registrations beside the comms'");

  if (lazy_registration) {
    void* rreq = post_irecv1(*c, starved.recv, starved_buffer.data(), n, 5, starved_handle);
    const ncclResult_t result = wait_result(*c, rreq,
                                            "a receive whose clear-to-send has no "
                                            "registered memory");
    FT_REQUIRE(result != ncclSuccess, "a receive completed with no memory for its clear-to-send");
    require_logged("no registered memory for the clear-to-send");
    FT_OK(c->dereg_mr(starved.recv, starved_handle));
    close_pair(*c, starved);
  }

  // Room for the transfer's two buffers and the protocol's own.
  for (int i = 0; i < 4; ++i) {
    FT_OK(c->dereg_mr(pair.recv, handles.back()));
    handles.pop_back();
  }
  transfer(*c, pair, pattern_seed(72, 0));
  for (void* handle : handles) FT_OK(c->dereg_mr(pair.recv, handle));
  close_pair(*c, pair);
  FT_OK(c->finalize());
}

// 4 queue pairs need 4 x 328 completion entries on the send side: more
// than SOFTVERBS_MAX_CQE=700; 2 fit.
void completion_depth() {
  ::setenv("SOFTVERBS_MAX_CQE", "700", 1);
  ::setenv("WEFT_IB_QPS_PER_CONNECTION", "4", 1);
  {
    auto c = open_with_log();
    Pair pair;
    FT_REQUIRE(try_pair(*c, test_device(*c), &pair) == ncclSystemError,
               "a connection needing more completion entries than max_cqe did not fail");
    require_logged(
        "allows 700 (ibv_query_device max_cqe): lower WEFT_IB_QPS_PER_CONNECTION to "
        "at most 2");
    FT_OK(c->finalize());
  }
  ::setenv("WEFT_IB_QPS_PER_CONNECTION", "2", 1);
  auto c = load_plugin(12);
  FT_OK(c->init(nullptr));
  Pair pair;
  FT_OK(try_pair(*c, test_device(*c), &pair));
  transfer(*c, pair, pattern_seed(73, 0));
  close_pair(*c, pair);
  FT_OK(c->finalize());
}

}  // namespace

TEST_CASE("a comm past the device's max_qp fails naming it", "[limits]") {
  auto r = run_one([&](Rank&) {
    comms_up_to("SOFTVERBS_MAX_QP", "allows 8 queue pairs (ibv_query_device max_qp",
                "lower WEFT_IB_QPS_PER_CONNECTION");
  });
  REQUIRE_RANKS(r);
}

TEST_CASE("a comm past the device's max_cq fails naming it", "[limits]") {
  auto r = run_one([&](Rank&) {
    comms_up_to("SOFTVERBS_MAX_CQ", "allows 8 completion queues (ibv_query_device max_cq",
                "NCCL_NCHANNELS_PER_NET_PEER");
  });
  REQUIRE_RANKS(r);
}

TEST_CASE("a registration past the device's max_mr fails naming it", "[limits][mr_limit]") {
  auto r = run_one([&](Rank&) { registrations_up_to_max_mr(); });
  REQUIRE_RANKS(r);
}

TEST_CASE("a connection whose completions exceed max_cqe fails naming it", "[limits]") {
  auto r = run_one([&](Rank&) { completion_depth(); });
  REQUIRE_RANKS(r);
}
