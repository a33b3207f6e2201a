#include "net_ops.h"

#include <cstdlib>
#include <cstring>

#include "core/idle_backoff.h"
#include "pattern.h"

namespace weft::ft {

std::unique_ptr<NetClient> load_plugin(int abi_version) {
  std::string err;
  auto c = NetClient::load(plugin_path(), abi_version, err);
  FT_REQUIRE(c != nullptr,
             "NetClient::load(" << plugin_path() << ", v" << abi_version << ") failed: " << err);
  FT_REQUIRE(c->abi_version() == abi_version,
             "asked for v" << abi_version << ", got v" << c->abi_version());
  return c;
}

std::unique_ptr<NetClient> open_plugin(int abi_version) {
  auto c = load_plugin(abi_version);
  FT_OK(c->init(nullptr));
  int ndev = -1;
  FT_OK(c->devices(&ndev));
  FT_REQUIRE(ndev > 0, "devices() reported " << ndev << " devices");
  return c;
}

int test_device(NetClient& c) {
  const char* s = std::getenv("WEFT_TEST_DEV");
  int dev = s ? std::atoi(s) : 0;
  int ndev = 0;
  FT_OK(c.devices(&ndev));
  FT_REQUIRE(dev >= 0 && dev < ndev, "WEFT_TEST_DEV=" << dev << " but " << ndev << " devices");
  return dev;
}

size_t large_size(int abi_version) {
  const char* s = std::getenv("WEFT_TEST_LARGE_VERSIONS");
  if (!s || !*s) return 64u << 20;
  std::string list = std::string(",") + s + ",";
  return list.find("," + std::to_string(abi_version) + ",") != std::string::npos ? (64u << 20)
                                                                                 : (1u << 20);
}

size_t truncating_send_limit() {
  const char* s = std::getenv("WEFT_TEST_TRUNC_MAX_SEND");
  return s != nullptr && *s ? std::strtoull(s, nullptr, 10) : SIZE_MAX;
}

void* do_listen(NetClient& c, int dev, Handle& h) {
  void* lc = nullptr;
  std::memset(h.bytes, 0, sizeof h.bytes);
  FT_OK(c.listen(dev, h.bytes, &lc));
  FT_REQUIRE(lc != nullptr, "listen returned success with a NULL listen comm");
  return lc;
}

void* listen_and_hand_over(NetClient& c, int dev, Channel& peer, HandedOver* handles) {
  void* lc = do_listen(c, dev, handles->genuine);
  FT_OK(c.close_listen(do_listen(c, dev, handles->closed)));
  peer.send_bytes(handles->genuine.bytes, sizeof handles->genuine.bytes);
  peer.send_bytes(handles->closed.bytes, sizeof handles->closed.bytes);
  return lc;
}

HandedOver receive_handed_over(Channel& peer) {
  HandedOver handles;
  peer.recv_bytes(handles.genuine.bytes, sizeof handles.genuine.bytes);
  peer.recv_bytes(handles.closed.bytes, sizeof handles.closed.bytes);
  return handles;
}

void* connect_until_ready(NetClient& c, int dev, Handle& h) {
  IdleBackoff backoff;
  for (;;) {
    void* sc = nullptr;
    FT_OK(c.connect(dev, h.bytes, &sc));
    if (sc) return sc;
    FT_DEADLINE("connect kept returning a NULL comm");
    backoff.pause();
  }
}

void* accept_until_ready(NetClient& c, void* lc) {
  IdleBackoff backoff;
  for (;;) {
    void* rc = nullptr;
    FT_OK(c.accept(lc, &rc));
    if (rc) return rc;
    FT_DEADLINE("accept kept returning a NULL comm");
    backoff.pause();
  }
}

void* recv_side_connect(NetClient& c, int dev, Channel& peer) {
  Handle h;
  void* lc = do_listen(c, dev, h);
  peer.send_bytes(h.bytes, sizeof h.bytes);
  void* rc = accept_until_ready(c, lc);
  FT_OK(c.close_listen(lc));
  return rc;
}

void* send_side_connect(NetClient& c, int dev, Channel& peer) {
  Handle h;
  peer.recv_bytes(h.bytes, sizeof h.bytes);
  return connect_until_ready(c, dev, h);
}

Mr::Mr(NetClient& c, void* comm, void* data, size_t size) : c_(c), comm_(comm) {
  FT_OK(c.reg_mr(comm, data, size, NCCL_PTR_HOST, &mh_));
}

Mr::~Mr() {
  if (mh_) c_.dereg_mr(comm_, mh_);
}

void* post_isend(NetClient& c, void* comm, void* data, size_t size, int tag, void* mh,
                 const std::function<void()>& between, int* nulls) {
  IdleBackoff backoff;
  for (;;) {
    void* req = reinterpret_cast<void*>(0xdeadbeef);  // must be overwritten
    FT_OK(c.isend(comm, data, size, tag, mh, &req));
    FT_REQUIRE(req != reinterpret_cast<void*>(0xdeadbeef), "isend left *request untouched");
    if (req) return req;
    if (nulls) ++*nulls;
    if (between) between();
    FT_DEADLINE("isend kept returning a NULL request (size " + std::to_string(size) + ")");
    backoff.pause();
  }
}

void* post_irecv(NetClient& c, void* comm, int n, void** data, size_t* sizes, int* tags, void** mhs,
                 const std::function<void()>& between, int* nulls) {
  IdleBackoff backoff;
  for (;;) {
    void* req = reinterpret_cast<void*>(0xdeadbeef);
    FT_OK(c.irecv(comm, n, data, sizes, tags, mhs, &req));
    FT_REQUIRE(req != reinterpret_cast<void*>(0xdeadbeef), "irecv left *request untouched");
    if (req) return req;
    if (nulls) ++*nulls;
    if (between) between();
    FT_DEADLINE("irecv kept returning a NULL request (n " + std::to_string(n) + ")");
    backoff.pause();
  }
}

void* post_irecv1(NetClient& c, void* comm, void* data, size_t size, int tag, void* mh,
                  const std::function<void()>& between, int* nulls) {
  return post_irecv(c, comm, 1, &data, &size, &tag, &mh, between, nulls);
}

bool poll_once(NetClient& c, void* req, ncclResult_t* res, int* sizes) {
  int done = 0;
  *res = c.test(req, &done, sizes);
  return *res != ncclSuccess || done;
}

ncclResult_t wait_result(NetClient& c, void* req, const std::string& what, int* sizes) {
  int local[8];
  int* s = sizes ? sizes : local;
  IdleBackoff backoff;
  for (;;) {
    ncclResult_t r;
    if (poll_once(c, req, &r, s)) return r;
    FT_DEADLINE("waiting for " + what);
    backoff.pause();
  }
}

int wait_ok(NetClient& c, void* req, const std::string& what, int* sizes) {
  int local[8] = {-1, -1, -1, -1, -1, -1, -1, -1};
  int* s = sizes ? sizes : local;
  ncclResult_t r = wait_result(c, req, what, s);
  FT_REQUIRE(r == ncclSuccess, "test() on " << what << " returned " << result_name(r));
  return s[0];
}

namespace {

std::string first_pending(const std::vector<Pending>& reqs) {
  for (auto& p : reqs)
    if (!p.done) return p.what;
  return "";
}

}  // namespace

size_t progress(NetClient& c, std::vector<Pending>& reqs) {
  size_t left = 0;
  for (auto& p : reqs) {
    if (p.done || !p.req) continue;
    ncclResult_t r;
    if (poll_once(c, p.req, &r, p.sizes)) {
      FT_REQUIRE(r == ncclSuccess, "test() on " << p.what << " returned " << result_name(r));
      p.done = true;
    } else {
      ++left;
    }
  }
  return left;
}

void wait_all(NetClient& c, std::vector<Pending>& reqs) {
  IdleBackoff backoff;
  size_t pending = reqs.size();
  for (size_t left; (left = progress(c, reqs)) > 0;) {
    FT_DEADLINE("waiting for requests to complete (first pending: " + first_pending(reqs) + ")");
    if (left < pending) {
      pending = left;
      backoff.reset();
    } else {
      backoff.pause();
    }
  }
}

void check_received(const uint8_t* data, size_t got, size_t posted, uint64_t seed,
                    const std::string& what) {
  std::string e = check_pattern(data, got, seed);
  FT_REQUIRE(e.empty(), what << ": received bytes wrong: " << e);
  if (posted > got) {
    e = check_byte(data + got, posted - got, Buffer::kPoison);
    FT_REQUIRE(e.empty(), what << ": bytes written past the message end (" << got
                               << ") inside the posted receive (" << posted << "): " << e);
  }
}

void check_received(const Buffer& buf, int reported, size_t sent, size_t posted, uint64_t seed,
                    const std::string& what) {
  FT_REQUIRE(reported == static_cast<int>(sent),
             what << ": test() reported size " << reported << ", sent " << sent);
  check_received(buf.data(), sent, posted, seed, what);
  std::string e = buf.check_guards();
  FT_REQUIRE(e.empty(), what << ": " << e);
}

}  // namespace weft::ft
