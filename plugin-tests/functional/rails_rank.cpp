// One rank of the multi-rail test (see rails.sh): two namespaces joined by
// two veth pairs, libfabric tcp on both, the rdma protocol. Modes:
//   grouped  WEFT_RAIL_GROUPING=all made device 0 span both rails
//   vdevice  grouping off; the ranks merge devices 0 and 1 with makeVDevice
//   fail     like grouped, then one rail is cut (the script's iptables
//            rules) before a striped message: the sender must get an error
//            and both sides must close without hanging
// Every received byte is checked, with 32 striped messages in flight so
// completions from the two rails interleave.
//
//   weft-rails-rank --server|--client <addr> <port> <mode> <flag-dir>
// Exit: 0 passed, 1 failed (message on stderr).
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>

#include "channel.h"
#include "net_ops.h"
#include "pattern.h"

using namespace weft;
using namespace weft::ft;

namespace {

const std::vector<size_t> kSizes = {0,          1,       4095,           65536,
                                    262144 + 3, 1 << 20, (16 << 20) + 5, 64 << 20};
constexpr size_t kBurst = 32;
constexpr size_t kBurstSize = 1 << 20;
constexpr int kVersion = 12;

std::string mode;
std::string flag_dir;

std::string device_name;  // of the device under test

// The device under test: a two-rail one, made here in vdevice mode.
int rail_device(NetClient& c) {
  int ndev = 0;
  FT_OK(c.devices(&ndev));
  int dev = 0;
  if (mode == "vdevice") {
    FT_REQUIRE(ndev >= 2, "vdevice mode: " << ndev << " devices, need 2 (grouping off)");
    FT_OK(c.make_vdevice({0, 1}, &dev));
    int after = 0;
    FT_OK(c.devices(&after));
    FT_REQUIRE(dev == ndev && after == ndev + 1, "makeVDevice returned device "
                                                     << dev << " of " << after
                                                     << ", expected the new " << ndev);
    NetDeviceInfo info;
    FT_OK(c.properties(dev, &info));
    FT_REQUIRE(info.vdevs == std::vector<int>({0, 1}), "vProps of the merged device");
    FT_REQUIRE(info.plane_id == -1, "a merged device reports planeId " << info.plane_id);
    for (int nic = 0; nic < 2; ++nic) {
      NetDeviceInfo single;
      FT_OK(c.properties(nic, &single));
      // Ungrouped NICs: each its own group (railId) and plane 0 of it.
      FT_REQUIRE(
          single.vdevs == std::vector<int>({nic}) && single.rail_id == nic && single.plane_id == 0,
          "device " << nic << ": vProps/railId/planeId " << single.vdevs.size() << "/"
                    << single.rail_id << "/" << single.plane_id);
    }
    // A merged device cannot be merged with one of its own NICs again.
    int again = -1;
    FT_REQUIRE(c.make_vdevice({0, dev}, &again) == ncclInvalidArgument,
               "merging a NIC twice was not refused");
  }
  NetDeviceInfo info;
  FT_OK(c.properties(dev, &info));
  if (mode != "vdevice") {
    // Grouped by weft: one device of two planes, reported as itself.
    FT_REQUIRE(info.vdevs == std::vector<int>({dev}) && info.rail_id == 0 && info.plane_id == -1,
               "grouped device: vProps/railId/planeId " << info.vdevs.size() << "/" << info.rail_id
                                                        << "/" << info.plane_id);
  }
  FT_REQUIRE(info.name.find('+') != std::string::npos,
             "device " << dev << " '" << info.name << "' does not span two rails");
  std::fprintf(stderr, "%s: device %d '%s', %d Mbps\n", mode.c_str(), dev, info.name.c_str(),
               info.speed_mbps);
  device_name = info.name;
  return dev;
}

// Waits for the script to create flag_dir/<name>.
void wait_flag(const std::string& name) {
  std::string path = flag_dir + "/" + name;
  for (int i = 0; i < 600 && access(path.c_str(), F_OK) != 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  FT_REQUIRE(access(path.c_str(), F_OK) == 0, "the script never created " << path);
}

std::string read_flag(const std::string& name) {
  std::string path = flag_dir + "/" + name;
  FILE* f = std::fopen(path.c_str(), "r");
  FT_REQUIRE(f != nullptr, "cannot read " << path);
  char line[64] = {};
  if (std::fgets(line, sizeof(line), f) == nullptr) line[0] = 0;
  std::fclose(f);
  std::string text = line;
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  return text;
}

void touch_flag(const std::string& name) {
  std::string path = flag_dir + "/" + name;
  FILE* f = std::fopen(path.c_str(), "w");
  FT_REQUIRE(f != nullptr, "cannot create " << path);
  std::fclose(f);
}

void run_server(Channel& ch) {
  auto c = open_plugin(kVersion);
  const int dev = rail_device(*c);
  void* rc = recv_side_connect(*c, dev, ch);
  const size_t cap = kSizes.back() + 4096;
  Buffer buf(cap);
  Buffer burst(kBurst * kBurstSize);
  {
    Mr mr(*c, rc, buf.data(), cap);
    Mr burst_mr(*c, rc, burst.data(), burst.size());
    for (size_t i = 0; i < kSizes.size(); ++i) {
      const std::string what = mode + " receive of " + std::to_string(kSizes[i]);
      buf.poison();
      void* req = post_irecv1(*c, rc, buf.data(), cap, 0, mr.get());
      ch.send_u64(i);
      int got = wait_ok(*c, req, what);
      FT_REQUIRE(got == static_cast<int>(kSizes[i]), what << ": size " << got);
      check_received(buf.data(), kSizes[i], cap, pattern_seed(41, i), what);
    }
    burst.poison();
    std::vector<Pending> reqs;
    for (size_t k = 0; k < kBurst; ++k) {
      void* req = post_irecv1(*c, rc, burst.data() + k * kBurstSize, kBurstSize, 1, burst_mr.get(),
                              [&] { progress(*c, reqs); });
      reqs.push_back({req, false, {-1}, mode + " burst receive " + std::to_string(k)});
    }
    ch.send_u64(kBurst);
    wait_all(*c, reqs);
    for (size_t k = 0; k < kBurst; ++k) {
      check_received(burst.data() + k * kBurstSize, kBurstSize, kBurstSize, pattern_seed(43, k),
                     reqs[k].what);
    }
    if (mode == "fail") {
      ch.sync("break");  // the client asks the script to cut a rail
      wait_flag("broken");
      void* req = post_irecv1(*c, rc, buf.data(), cap, 0, mr.get());
      ch.send_u64(99);
      // Part of the message never arrives. When the cut pair carried only
      // data writes, the sender's abort notice (over rail 0) must fail the
      // receive; when it carried rail 0 the notice is lost too and the
      // receive may stay pending. Either way closing must not hang.
      std::string cut = read_flag("cut");
      std::string rail0 = device_name.substr(0, device_name.find('+'));
      bool notice_expected = cut != rail0;
      ncclResult_t res = ncclSuccess;
      int sizes[8] = {};
      bool finished = false;
      auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
      while (!finished && (notice_expected || std::chrono::steady_clock::now() <
                                                  deadline - std::chrono::seconds(28))) {
        finished = poll_once(*c, req, &res, sizes);
        FT_REQUIRE(
            std::chrono::steady_clock::now() < deadline,
            "the receive did not fail within 30 s although rail 0 (" << rail0 << ") was not cut");
      }
      FT_REQUIRE(!finished || res != ncclSuccess,
                 "a receive completed although a rail was cut before its message");
      std::fprintf(stderr, "rails server: %s cut, rail 0 is %s: the receive %s\n", cut.c_str(),
                   rail0.c_str(),
                   finished ? ("failed with " + std::to_string(res)).c_str() : "is still pending");
      ch.sync("sender failed");
    } else {
      ch.sync("done");
    }
  }
  auto start = std::chrono::steady_clock::now();
  FT_OK(c->close_recv(rc));
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  FT_REQUIRE(seconds < 30, "closing the receive comm took " << seconds << " s");
  FT_OK(c->finalize());
  std::fprintf(stderr,
               "rails server (%s): %zu sizes up to %zu bytes and %zu x %zu in flight "
               "verified\n",
               mode.c_str(), kSizes.size(), kSizes.back(), kBurst, kBurstSize);
}

void run_client(Channel& ch) {
  auto c = open_plugin(kVersion);
  void* sc = send_side_connect(*c, rail_device(*c), ch);
  Buffer buf(kSizes.back());
  Buffer burst(kBurst * kBurstSize);
  {
    Mr mr(*c, sc, buf.data(), buf.size());
    Mr burst_mr(*c, sc, burst.data(), burst.size());
    for (size_t i = 0; i < kSizes.size(); ++i) {
      fill_pattern(buf.data(), kSizes[i], pattern_seed(41, i));
      FT_REQUIRE(ch.recv_u64() == i, "out of step");
      void* req = post_isend(*c, sc, buf.data(), kSizes[i], 0, mr.get());
      wait_ok(*c, req, mode + " send of " + std::to_string(kSizes[i]));
    }
    for (size_t k = 0; k < kBurst; ++k) {
      fill_pattern(burst.data() + k * kBurstSize, kBurstSize, pattern_seed(43, k));
    }
    FT_REQUIRE(ch.recv_u64() == kBurst, "out of step");
    std::vector<Pending> reqs;
    for (size_t k = 0; k < kBurst; ++k) {
      void* req = post_isend(*c, sc, burst.data() + k * kBurstSize, kBurstSize, 1, burst_mr.get(),
                             [&] { progress(*c, reqs); });
      reqs.push_back({req, false, {-1}, mode + " burst send " + std::to_string(k)});
    }
    wait_all(*c, reqs);
    if (mode == "fail") {
      // Only once the server has seen every burst receive complete: a cut
      // that lands while it still tests the last one can fail it (the cut
      // pair may carry the liveness link, which then says the peer is gone).
      ch.sync("break");
      touch_flag("break");
      wait_flag("broken");
      FT_REQUIRE(ch.recv_u64() == 99, "out of step");
      fill_pattern(buf.data(), kSizes.back(), pattern_seed(47, 0));
      // The send fails in test() when its writes fail; or in isend itself
      // when the cut lost the clear-to-send (rail 0's connection reset
      // while idle): the probe of rail 0 then fails within
      // WEFT_PEER_TIMEOUT_MS.
      auto start = std::chrono::steady_clock::now();
      void* req = nullptr;
      ncclResult_t res = ncclSuccess;
      while (req == nullptr && res == ncclSuccess) {
        res = c->isend(sc, buf.data(), kSizes.back(), 0, mr.get(), &req);
        FT_DEADLINE("isend over a cut rail neither failed nor returned a request");
      }
      if (req != nullptr) res = wait_result(*c, req, "send over a cut rail");
      double seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      FT_REQUIRE(res != ncclSuccess, "a send striped over a cut rail succeeded");
      std::fprintf(stderr, "rails client: the send over the cut rail failed with %d after %.1f s\n",
                   static_cast<int>(res), seconds);
      ch.sync("sender failed");
    } else {
      ch.sync("done");
    }
  }
  FT_OK(c->close_send(sc));
  FT_OK(c->finalize());
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 6 || (std::strcmp(argv[1], "--server") && std::strcmp(argv[1], "--client"))) {
    std::fprintf(stderr, "usage: %s --server|--client <addr> <port> grouped|vdevice|fail <dir>\n",
                 argv[0]);
    return 2;
  }
  const bool server = std::strcmp(argv[1], "--server") == 0;
  const std::string addr = argv[2];
  const int port = std::atoi(argv[3]);
  mode = argv[4];
  flag_dir = argv[5];
  set_rank_label(server ? "rails server" : "rails client");
  start_deadline();
  try {
    Channel ch(tcp_rank_socket(server, addr, port));
    if (server)
      run_server(ch);
    else
      run_client(ch);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "FAILED: %s\n", e.what());
    return 1;
  }
  std::fprintf(stderr, "%s (%s): passed\n", server ? "rails server" : "rails client", mode.c_str());
  return 0;
}
