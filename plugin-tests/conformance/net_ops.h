// Plugin operations for the rank bodies, through NetClient (the ABI only):
// loading, connection setup that drives the non-blocking calls, posting with
// NULL-request retry, and bounded waits on requests.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "channel.h"
#include "check.h"
#include "pattern.h"
#include "plugin_under_test.h"
#include "weft_client/net_client.h"

namespace weft::ft {

struct Handle {
  char bytes[NCCL_NET_HANDLE_MAXSIZE] = {};
};

// Loads the plugin at exactly `abi_version`, inits it, checks devices() > 0.
std::unique_ptr<NetClient> open_plugin(int abi_version);
// Loads without init.
std::unique_ptr<NetClient> load_plugin(int abi_version);
// The device the tests use: WEFT_TEST_DEV or 0.
int test_device(NetClient& c);

// Largest size the tests use on this provider/version (64 MiB, or 1 MiB
// for versions not listed in WEFT_TEST_LARGE_VERSIONS when it is set).
size_t large_size(int abi_version);

// Largest message the tests send into a smaller receive: SIZE_MAX, or
// WEFT_TEST_TRUNC_MAX_SEND where the transport never completes (nor fails)
// a truncated receive above a size (libfabric's shm, tagged: 4 KiB).
size_t truncating_send_limit();

void* do_listen(NetClient& c, int dev, Handle& h);
// For the impostor checks: a handle of an open listen and one of a listen
// closed at once (a stale handle). The victim's side listens, sends both
// to `peer` and returns the open listen comm; the other side receives them.
struct HandedOver {
  Handle genuine;
  Handle closed;
};
void* listen_and_hand_over(NetClient& c, int dev, Channel& peer, HandedOver* handles);
HandedOver receive_handed_over(Channel& peer);
void* connect_until_ready(NetClient& c, int dev, Handle& h);
void* accept_until_ready(NetClient& c, void* listen_comm);

// Two-process connection: the listener (receiver) sends its handle over the
// peer channel; the connector (sender) receives it and connects.
void* recv_side_connect(NetClient& c, int dev, Channel& peer);  // listen+accept+closeListen
void* send_side_connect(NetClient& c, int dev, Channel& peer);  // connect

class Mr {
 public:
  Mr(NetClient& c, void* comm, void* data, size_t size);
  ~Mr();
  Mr(const Mr&) = delete;
  Mr& operator=(const Mr&) = delete;
  void* get() const { return mh_; }

 private:
  NetClient& c_;
  void* comm_;
  void* mh_ = nullptr;
};

// Posting. A NULL *request with success means "retry later": call `between`
// (e.g. progress on other requests) and retry, bounded by the deadline.
// `nulls` (optional) counts the NULL answers.
void* post_isend(NetClient& c, void* comm, void* data, size_t size, int tag, void* mh,
                 const std::function<void()>& between = {}, int* nulls = nullptr);
void* post_irecv(NetClient& c, void* comm, int n, void** data, size_t* sizes, int* tags, void** mhs,
                 const std::function<void()>& between = {}, int* nulls = nullptr);
void* post_irecv1(NetClient& c, void* comm, void* data, size_t size, int tag, void* mh,
                  const std::function<void()>& between = {}, int* nulls = nullptr);

// One test() call. Returns true when the request finished (done or error);
// `res` gets test()'s result, sizes (may be null) what test() reported.
bool poll_once(NetClient& c, void* req, ncclResult_t* res, int* sizes);
// Waits until done; fails on any error. Returns sizes[0].
int wait_ok(NetClient& c, void* req, const std::string& what, int* sizes = nullptr);
// Waits until done or error and returns test()'s result (for expected errors).
ncclResult_t wait_result(NetClient& c, void* req, const std::string& what, int* sizes = nullptr);

// A set of outstanding requests polled together.
struct Pending {
  void* req = nullptr;
  bool done = false;
  int sizes[8] = {-1, -1, -1, -1, -1, -1, -1, -1};
  std::string what;
};
// One pass of test() over the unfinished ones; fails on error. Returns the
// number still outstanding.
size_t progress(NetClient& c, std::vector<Pending>& reqs);
void wait_all(NetClient& c, std::vector<Pending>& reqs);

// Checks a received message: every byte of the pattern and untouched
// poison between the message end and the posted size.
void check_received(const uint8_t* data, size_t got, size_t posted, uint64_t seed,
                    const std::string& what);
// The same for a whole receive: the size test() reported is the size sent,
// then the bytes as above, then the guards around the buffer.
void check_received(const Buffer& buf, int reported, size_t sent, size_t posted, uint64_t seed,
                    const std::string& what);

}  // namespace weft::ft
