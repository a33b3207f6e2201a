// The check of peer addresses before fi_av_insert: shm region names that
// cannot leave /dev/shm, and region files made here in /dev/shm (genuine
// in both known layouts, stale, truncated, forged) against a real shm
// endpoint's region from the libfabric in use.
#include "ofi/endpoint/peer_check.h"

#include <fcntl.h>
#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstring>
#include <random>
#include <string>
#include <vector>

using namespace weft::ofi;

namespace {

constexpr size_t kRegionSize = 64 << 10;

// A file in /dev/shm with a name unique to this process, removed at the end.
class ShmFile {
 public:
  ShmFile() {
    static int counter = 0;
    name_ = "weft-peer-check-" + std::to_string(::getpid()) + "-" + std::to_string(counter++);
    path_ = std::string(shm_check::kRegionDir) + name_;
  }
  ~ShmFile() { ::unlink(path_.c_str()); }
  ShmFile(const ShmFile&) = delete;
  ShmFile& operator=(const ShmFile&) = delete;

  void write(const std::vector<uint8_t>& bytes) const {
    int fd = ::open(path_.c_str(), O_CREAT | O_TRUNC | O_WRONLY | O_CLOEXEC, 0600);
    REQUIRE(fd >= 0);
    REQUIRE(::write(fd, bytes.data(), bytes.size()) == static_cast<ssize_t>(bytes.size()));
    ::close(fd);
  }
  const std::string& name() const { return name_; }
  const std::string& path() const { return path_; }
  std::string address() const { return "fi_shm://" + name_; }

 private:
  std::string name_;
  std::string path_;
};

// Field positions of the two layouts weft knows (see peer_check.cpp),
// written independently here from regions libfabric 1.17 and 2.6 made.
struct Layout {
  int version;
  size_t header_size, pid_at, total_size_at, offsets_at, offset_count, name_index;
};
constexpr Layout kV4{4, 120, 4, 40, 64, 7, 5};
constexpr Layout kV10{10, 192, 40, 56, 128, 7, 6};

template <typename T>
void put(std::vector<uint8_t>& bytes, size_t at, T value) {
  std::memcpy(bytes.data() + at, &value, sizeof value);
}

// A region as libfabric lays it out: header, offsets spread over the file,
// the name at its offset, owned by `pid`.
std::vector<uint8_t> make_region(const Layout& l, const std::string& name, int32_t pid) {
  std::vector<uint8_t> bytes(kRegionSize, 0);
  bytes[0] = static_cast<uint8_t>(l.version);
  put<int32_t>(bytes, l.pid_at, pid);
  put<uint64_t>(bytes, l.total_size_at, kRegionSize);
  for (size_t i = 0; i < l.offset_count; ++i) {
    uint64_t offset = 256 + 4096 * i;
    put<uint64_t>(bytes, l.offsets_at + 8 * i, offset);
    if (i == l.name_index) std::memcpy(bytes.data() + offset, name.c_str(), name.size() + 1);
  }
  return bytes;
}

pid_t dead_pid() {
  pid_t pid = ::fork();
  if (pid == 0) ::_exit(0);
  REQUIRE(pid > 0);
  REQUIRE(::waitpid(pid, nullptr, 0) == pid);
  return pid;
}

bool name_ok(const std::string& address, std::string* name = nullptr) {
  std::string out, problem;
  bool ok = shm_check::region_name(reinterpret_cast<const uint8_t*>(address.c_str()),
                                   address.size() + 1, &out, &problem);
  if (name != nullptr) *name = out;
  return ok;
}

bool usable(const std::string& provider, const std::string& address, std::string* problem) {
  return peer_address_usable(provider, reinterpret_cast<const uint8_t*>(address.c_str()),
                             address.size() + 1, problem);
}

}  // namespace

TEST_CASE("shm region names stay inside /dev/shm", "[unit][peer_check]") {
  std::string name;
  CHECK(name_ok("fi_shm://1234:0:0", &name));
  CHECK(name == "1234:0:0");
  CHECK(name_ok("fi_ns://node:77", &name));  // any scheme, as libfabric's smr_no_prefix
  CHECK(name == "node:77");
  CHECK(name_ok("plain", &name));
  CHECK(name == "plain");

  for (const char* bad :
       {"fi_shm://", "fi_shm://.", "fi_shm://..", "fi_shm://../etc/passwd", "fi_shm:///etc/passwd",
        "fi_shm://a/b", "fi_shm://x/../../y", "fi_shm://tab\there", "fi_shm://\x7f"}) {
    INFO(bad);
    CHECK_FALSE(name_ok(bad));
  }
  // 255 characters fit libfabric's name buffer, 256 do not.
  CHECK(name_ok("fi_shm://" + std::string(255 - 9, 'n')));
  CHECK_FALSE(name_ok("fi_shm://" + std::string(256 - 9, 'n')));
  CHECK_FALSE(name_ok("fi_shm://" + std::string(4096, 'n')));

  // The NUL must come within the given size; bytes after it are ignored.
  const uint8_t unterminated[] = {'f', 'i', '_', 's', 'h', 'm', ':', '/', '/', 'a', 'b'};
  std::string problem;
  CHECK_FALSE(shm_check::region_name(unterminated, sizeof unterminated, &name, &problem));
  CHECK(problem.find("NUL") != std::string::npos);
  const uint8_t padded[] = {'f', 'i', '_', 's', 'h', 'm', ':', '/', '/', 'a', 0, 0xff, '/'};
  CHECK(shm_check::region_name(padded, sizeof padded, &name, &problem));
  CHECK(name == "a");
  CHECK_FALSE(shm_check::region_name(nullptr, 0, &name, &problem));
}

TEST_CASE("a genuine region of either layout owned by a live process is usable",
          "[unit][peer_check]") {
  for (const Layout& layout : {kV4, kV10}) {
    INFO("region version " << layout.version);
    ShmFile file;
    file.write(make_region(layout, file.name(), ::getpid()));
    std::string problem;
    CHECK(shm_check::region_usable(file.name(), layout.version, &problem));
    CHECK(problem.empty());
  }
}

TEST_CASE("stale, foreign and forged regions are refused with the reason", "[unit][peer_check]") {
  for (const Layout& layout : {kV4, kV10}) {
    const Layout& other = layout.version == kV4.version ? kV10 : kV4;
    INFO("region version " << layout.version);
    ShmFile file;
    auto refused = [&](const std::vector<uint8_t>& bytes, const std::string& expect) {
      file.write(bytes);
      std::string problem;
      bool ok = shm_check::region_usable(file.name(), layout.version, &problem);
      INFO("expected '" << expect << "' in: " << problem);
      CHECK_FALSE(ok);
      CHECK(problem.find(expect) != std::string::npos);
      CHECK(problem.find(file.path()) != std::string::npos);  // names the region
    };
    const auto genuine = make_region(layout, file.name(), ::getpid());

    // The owner died and left its region behind (SIGKILL, crash).
    refused(make_region(layout, file.name(), dead_pid()), "no longer exists");
    refused(make_region(layout, file.name(), 0), "not initialised");
    refused(make_region(layout, file.name(), -1), "negative owner pid");
    // A region of the other libfabric release.
    refused(make_region(other, file.name(), ::getpid()), "the peer runs libfabric");
    auto bytes = genuine;
    bytes[0] = 77;
    refused(bytes, "not a libfabric shm region");
    // The size the provider would map must be the file's.
    bytes = genuine;
    put<uint64_t>(bytes, layout.total_size_at, uint64_t{1} << 40);
    refused(bytes, "claims");
    bytes = genuine;
    bytes.resize(kRegionSize / 2);
    refused(bytes, "claims");
    // Offsets the provider follows: inside the header, past the end,
    // unordered, unaligned.
    const std::vector<std::pair<size_t, uint64_t>> bad_offsets = {
        {0, 8}, {layout.offset_count - 1, kRegionSize}, {2, 256}, {1, 4097}};
    for (auto [index, value] : bad_offsets) {
      bytes = genuine;
      put<uint64_t>(bytes, layout.offsets_at + 8 * index, value);
      refused(bytes, "bad header");
    }
    // Someone else's segment that happens to parse: not under this name.
    refused(make_region(layout, "another-name", ::getpid()), "does not record its own name");
    // Truncated and empty files, garbage.
    refused(std::vector<uint8_t>(layout.header_size - 1, 0), "smaller than a region header");
    refused({}, "smaller than a region header");
    std::mt19937_64 rng(layout.version);
    std::vector<uint8_t> garbage(kRegionSize);
    for (auto& b : garbage) b = static_cast<uint8_t>(rng());
    garbage[0] = static_cast<uint8_t>(layout.version);  // even with the right version byte
    refused(garbage, "region");
  }
}

TEST_CASE("files that are not regions and missing regions are refused", "[unit][peer_check]") {
  std::string problem;
  ShmFile missing;
  CHECK_FALSE(shm_check::region_usable(missing.name(), 4, &problem));
  CHECK(problem.find("does not exist") != std::string::npos);
  CHECK(problem.find(missing.path()) != std::string::npos);

  ShmFile target, link;
  target.write(make_region(kV4, target.name(), ::getpid()));
  REQUIRE(::symlink(target.path().c_str(), link.path().c_str()) == 0);
  CHECK_FALSE(shm_check::region_usable(link.name(), 4, &problem));
  CHECK(problem.find("symbolic link") != std::string::npos);

  ShmFile fifo;
  REQUIRE(::mkfifo(fifo.path().c_str(), 0600) == 0);
  CHECK_FALSE(shm_check::region_usable(fifo.name(), 4, &problem));  // must not block either
  CHECK(problem.find("not a regular file") != std::string::npos);

  ShmFile dir;
  REQUIRE(::mkdir(dir.path().c_str(), 0700) == 0);
  CHECK_FALSE(shm_check::region_usable(dir.name(), 4, &problem));
  ::rmdir(dir.path().c_str());
}

TEST_CASE("with an unknown layout, size and the pid in the name are checked",
          "[unit][peer_check]") {
  std::string problem;
  ShmFile small;
  small.write(std::vector<uint8_t>(100, 1));
  CHECK_FALSE(shm_check::region_usable(small.name(), 0, &problem));
  CHECK(problem.find("100 bytes") != std::string::npos);

  // libfabric names regions "<pid>:<uid>:<index>".
  std::string live = std::to_string(::getpid()) + ":0:9";
  std::string dead = std::to_string(dead_pid()) + ":0:9";
  for (const auto& [name, alive] : {std::pair{live, true}, std::pair{dead, false}}) {
    std::string path = std::string(shm_check::kRegionDir) + name;
    int fd = ::open(path.c_str(), O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600);
    if (fd < 0) continue;  // taken by a real region: leave it alone
    REQUIRE(::ftruncate(fd, kRegionSize) == 0);
    ::close(fd);
    problem.clear();
    CHECK(shm_check::region_usable(name, 0, &problem) == alive);
    if (!alive) CHECK(problem.find("no longer exists") != std::string::npos);
    ::unlink(path.c_str());
  }
}

TEST_CASE("only shm addresses are checked, and checks cannot leave /dev/shm",
          "[unit][peer_check]") {
  std::string problem;
  for (const char* provider : {"tcp;ofi_rxm", "udp;ofi_rxd", "tcp", "verbs;ofi_rxm", "efa"}) {
    CHECK(usable(provider, "fi_shm://does-not-exist", &problem));
    CHECK(peer_address_usable(provider, nullptr, 0, &problem));
  }
  CHECK_FALSE(usable("shm", "fi_shm://weft-peer-check-none", &problem));
  CHECK(problem.find("/dev/shm/weft-peer-check-none does not exist") != std::string::npos);

  // A usable region reached through ".." is still refused.
  ShmFile file;
  file.write(make_region(kV4, file.name(), ::getpid()));
  CHECK_FALSE(usable("shm", "fi_shm://../shm/" + file.name(), &problem));
  CHECK_FALSE(usable("shm", "fi_shm://" + std::string(300, 'x'), &problem));
}

TEST_CASE("the region of a real shm endpoint passes, and fails once it is closed",
          "[unit][peer_check]") {
  int version = shm_check::loaded_region_version();
  uint32_t loaded = fi_version();
  INFO("libfabric " << FI_MAJOR(loaded) << "." << FI_MINOR(loaded) << ", region version "
                    << version);
  fi_info* hints = fi_allocinfo();
  REQUIRE(hints != nullptr);
  hints->fabric_attr->prov_name = ::strdup("shm");
  hints->ep_attr->type = FI_EP_RDM;
  hints->caps = FI_MSG | FI_TAGGED;
  hints->addr_format = FI_ADDR_STR;
  hints->domain_attr->mr_mode = FI_MR_VIRT_ADDR | FI_MR_LOCAL | FI_MR_ALLOCATED | FI_MR_PROV_KEY;
  fi_info* info = nullptr;
  int rc = fi_getinfo(FI_VERSION(1, 17), nullptr, nullptr, 0, hints, &info);
  fi_freeinfo(hints);
  if (rc != 0) {
    WARN("no shm provider here (" << rc << "): skipped");
    return;
  }
  fid_fabric* fabric = nullptr;
  fid_domain* domain = nullptr;
  fid_av* av = nullptr;
  fid_cq* cq = nullptr;
  fid_ep* ep = nullptr;
  fi_av_attr av_attr{};
  av_attr.type = FI_AV_TABLE;
  fi_cq_attr cq_attr{};
  cq_attr.format = FI_CQ_FORMAT_TAGGED;
  REQUIRE(fi_fabric(info->fabric_attr, &fabric, nullptr) == 0);
  REQUIRE(fi_domain(fabric, info, &domain, nullptr) == 0);
  REQUIRE(fi_av_open(domain, &av_attr, &av, nullptr) == 0);
  REQUIRE(fi_cq_open(domain, &cq_attr, &cq, nullptr) == 0);
  REQUIRE(fi_endpoint(domain, info, &ep, nullptr) == 0);
  REQUIRE(fi_ep_bind(ep, &av->fid, 0) == 0);
  REQUIRE(fi_ep_bind(ep, &cq->fid, FI_TRANSMIT | FI_RECV) == 0);
  REQUIRE(fi_enable(ep) == 0);
  char address[256] = {};
  size_t size = sizeof address;
  REQUIRE(fi_getname(&ep->fid, address, &size) == 0);
  std::string text(address);
  INFO("address " << text);

  std::string problem;
  CHECK(usable(info->fabric_attr->prov_name, text, &problem));
  CHECK(problem.empty());
  // The layout table matches this libfabric: a wrong version is refused.
  std::string name;
  REQUIRE(name_ok(text, &name));
  if (version != 0) {
    CHECK_FALSE(shm_check::region_usable(name, version == 4 ? 10 : 4, &problem));
  }

  fi_close(&ep->fid);
  fi_close(&av->fid);
  fi_close(&cq->fid);
  fi_close(&domain->fid);
  fi_close(&fabric->fid);
  fi_freeinfo(info);
  CHECK_FALSE(usable("shm", text, &problem));
  CHECK(problem.find("does not exist") != std::string::npos);
}
