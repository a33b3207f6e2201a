#include "ofi/endpoint/peer_check.h"

#include <fcntl.h>
#include <rdma/fabric.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>
#include <limits>
#include <string_view>

#include "core/byte_codec.h"

namespace weft::ofi::shm_check {
namespace {

// Where libfabric's struct smr_region keeps what the provider trusts, for
// the region versions (SMR_VERSION, byte 0 of every region) of the
// libfabric releases weft is tested with. The offsets table is a run of
// size_t offsets from the region start, in increasing order, one of them
// the region's own name. 2.6: prov/shm/src/smr_util.h; 1.17 (no source
// here): its struct smr_region, matched field by field against regions
// Debian's 1.17 made (pid, size, offsets, name; it maps a 120-byte header).
struct RegionLayout {
  int version;
  const char* release;
  size_t header_size;  // sizeof(struct smr_region)
  size_t pid_at;       // int pid: set last by the creator, 0 while it initialises
  size_t total_size_at;
  size_t offsets_at;
  size_t offset_count;
  size_t name_offset_index;
};

constexpr RegionLayout kLayouts[] = {
    // cmd_queue, resp_queue, inject_pool, sar_pool, peer_data, name, sock_name
    {4, "1.17", 120, 4, 40, 64, 7, 5},
    // cmd_queue, inject_pool, cmd_stack, ret_queue, sar_pool, peer_data, name
    {10, "2.6", 192, 40, 56, 128, 7, 6},
};
constexpr size_t kMaxHeader = 192;

const RegionLayout* layout_for(int version) {
  for (const auto& layout : kLayouts) {
    if (layout.version == version) return &layout;
  }
  return nullptr;
}

// kill(pid, 0) tells whether a process with that pid exists in our PID
// namespace (EPERM: it exists, owned by another user). pid must be > 0:
// kill(0 or negative) addresses process groups and would "succeed".
// A reused pid makes a dead owner look alive; its region header is still
// genuine then, so the provider does not crash and the connect ends at
// WEFT_CONNECT_TIMEOUT_MS instead. A peer in another PID namespace (a
// container sharing /dev/shm but not PIDs) looks dead: weft's shm
// transport therefore needs peers that share PID and IPC namespaces (shm
// is for development and tests). /proc/<pid>/maps would settle both, but
// reading it takes the peer's mmap lock and grows with its mappings.
bool owner_alive(long pid, const std::string& path, std::string* problem) {
  bool valid = pid > 0 && pid <= std::numeric_limits<pid_t>::max();
  if (valid && (::kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM)) return true;
  *problem = "the process that created the peer's shared-memory region " + path + " (pid " +
             std::to_string(pid) +
             ") no longer exists: the peer has exited or was killed and left its region "
             "behind (a stale handle), or it runs in another PID namespace (weft's shm "
             "transport needs peers in one PID and IPC namespace)";
  return false;
}

// The owner pid that libfabric puts first in the names it makes
// ("<pid>:<uid>:<index>"), or 0 when the name is not of that form.
long pid_from_name(const std::string& name) {
  long pid = 0;
  size_t i = 0;
  for (; i < name.size() && i < 10 && name[i] >= '0' && name[i] <= '9'; ++i) {
    pid = pid * 10 + (name[i] - '0');
  }
  return i > 0 && i < name.size() && name[i] == ':' ? pid : 0;
}

bool header_usable(const RegionLayout& layout, int fd, const struct stat& st,
                   const std::string& name, const std::string& path, std::string* problem) {
  uint8_t header[kMaxHeader] = {};
  auto size = static_cast<uint64_t>(st.st_size);
  if (size < layout.header_size ||
      ::pread(fd, header, layout.header_size, 0) != static_cast<ssize_t>(layout.header_size)) {
    *problem = "the peer's shared-memory region " + path + " is " + std::to_string(size) +
               " bytes, smaller than a region header: not a libfabric shm region (forged or "
               "corrupt handle?)";
    return false;
  }
  if (header[0] != layout.version) {
    const RegionLayout* other = layout_for(header[0]);
    *problem = "the peer's shared-memory region " + path + " has header version " +
               std::to_string(header[0]) + ", this process's libfabric " + layout.release +
               " uses " + std::to_string(layout.version) +
               (other != nullptr ? std::string(": the peer runs libfabric ") + other->release +
                                       " (use the same libfabric on every rank)"
                                 : std::string(": not a libfabric shm region (forged or corrupt "
                                               "handle?)"));
    return false;
  }
  auto pid = static_cast<int32_t>(get_host32(header + layout.pid_at));
  if (pid <= 0) {
    *problem = "the peer's shared-memory region " + path +
               (pid == 0 ? " is not initialised: its owner died while creating it, or it is "
                           "not a libfabric shm region"
                         : " has a negative owner pid: corrupt or not a libfabric shm region");
    return false;
  }
  // The provider maps total_size bytes: more than the file faults, a
  // wild value fails the mmap and the provider uses MAP_FAILED.
  auto total_size = get_host64(header + layout.total_size_at);
  if (total_size != size) {
    *problem = "the peer's shared-memory region " + path + " claims " + std::to_string(total_size) +
               " bytes but the file has " + std::to_string(size) +
               ": corrupt or not a libfabric shm region";
    return false;
  }
  // The provider follows these offsets into the mapping.
  uint64_t previous = layout.header_size - 1;
  uint64_t name_offset = 0;
  for (size_t i = 0; i < layout.offset_count; ++i) {
    auto offset = get_host64(header + layout.offsets_at + 8 * i);
    if (offset <= previous || offset >= total_size || offset % 8 != 0) {
      *problem = "the peer's shared-memory region " + path + " has a bad header (offset " +
                 std::to_string(offset) + " in a region of " + std::to_string(total_size) +
                 " bytes): corrupt or not a libfabric shm region";
      return false;
    }
    previous = offset;
    if (i == layout.name_offset_index) name_offset = offset;
  }
  // The region records the name it was created under: a file that is not
  // the named peer's region (someone else's shm segment) fails here.
  char stored[kNameMax + 1] = {};
  size_t want = name.size() + 1;
  if (name_offset + want > total_size ||
      ::pread(fd, stored, want, static_cast<off_t>(name_offset)) != static_cast<ssize_t>(want) ||
      std::memcmp(stored, name.c_str(), want) != 0) {
    *problem = "the peer's shared-memory region " + path +
               " does not record its own name: corrupt or not a libfabric shm region";
    return false;
  }
  return owner_alive(pid, path, problem);
}

}  // namespace

bool region_name(const uint8_t* address, size_t size, std::string* name, std::string* problem) {
  const auto* text = reinterpret_cast<const char*>(address);
  const void* nul = address != nullptr ? std::memchr(address, 0, size) : nullptr;
  if (nul == nullptr) {
    *problem =
        "the shm address is not NUL-terminated within its " + std::to_string(size) + " bytes";
    return false;
  }
  std::string_view whole(text, static_cast<size_t>(static_cast<const uint8_t*>(nul) - address));
  // libfabric copies the whole address into a 256-byte name buffer.
  if (whole.size() > kNameMax) {
    *problem = "the shm address is " + std::to_string(whole.size()) + " characters, at most " +
               std::to_string(kNameMax) + " fit";
    return false;
  }
  // As smr_no_prefix: the region name follows the first "://".
  size_t scheme = whole.find("://");
  std::string_view region = scheme == std::string_view::npos ? whole : whole.substr(scheme + 3);
  if (region.empty() || region == "." || region == "..") {
    *problem = "the shm address '" + std::string(whole) + "' names no region";
    return false;
  }
  for (char c : region) {
    // '/' would leave /dev/shm; the rest keeps the name printable in logs.
    if (c == '/' || c < 0x20 || c > 0x7e) {
      *problem = "the shm address names a region with a '/' or a non-printable character";
      return false;
    }
  }
  *name = std::string(region);
  return true;
}

int loaded_region_version() {
  uint32_t version = fi_version();
  if (FI_MAJOR(version) == 1 && FI_MINOR(version) == 17) return 4;
  if (FI_MAJOR(version) == 2 && FI_MINOR(version) == 6) return 10;
  return 0;
}

bool region_usable(const std::string& name, int version, std::string* problem) {
  std::string path = std::string(kRegionDir) + name;
  // O_NOFOLLOW: a link is not a region; O_NONBLOCK: a FIFO must not block
  // the open. Read-write as the provider opens it, so permissions fail here.
  int fd = ::open(path.c_str(), O_RDWR | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
  if (fd < 0) {
    int error = errno;
    if (error == ENOENT) {
      *problem = "the peer's shared-memory region " + path +
                 " does not exist: the peer process has exited or closed its endpoint (a "
                 "stale handle), or it runs in another container or IPC namespace that does "
                 "not share /dev/shm";
    } else if (error == EACCES || error == EPERM) {
      struct stat st {};
      std::string owner =
          ::stat(path.c_str(), &st) == 0 ? " (owner uid " + std::to_string(st.st_uid) + ")" : "";
      *problem = "the peer's shared-memory region " + path + owner +
                 " cannot be opened by this process (uid " + std::to_string(::geteuid()) +
                 "): shm peers must run as the same user";
    } else if (error == ELOOP) {
      *problem = "the peer's shared-memory region " + path +
                 " is a symbolic link, not a region (forged handle?)";
    } else {
      *problem =
          "cannot open the peer's shared-memory region " + path + ": " + std::strerror(error);
    }
    return false;
  }
  struct stat st {};
  bool usable = false;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    *problem = "the peer's shared-memory region " + path +
               " is not a regular file (forged or corrupt handle?)";
  } else if (const RegionLayout* layout = layout_for(version)) {
    usable = header_usable(*layout, fd, st, name, path, problem);
  } else if (st.st_size < 4096) {
    // Layout unknown: a region is megabytes; the pid is in the name.
    *problem = "the peer's shared-memory region " + path + " is " + std::to_string(st.st_size) +
               " bytes: not a libfabric shm region";
  } else {
    long pid = pid_from_name(name);
    usable = pid == 0 || owner_alive(pid, path, problem);
  }
  ::close(fd);
  return usable;
}

}  // namespace weft::ofi::shm_check

namespace weft::ofi {

bool peer_address_usable(const std::string& provider, const uint8_t* address, size_t size,
                         std::string* problem) {
  // The core provider comes first: "shm", "tcp;ofi_rxm", "udp;ofi_rxd".
  if (provider.substr(0, provider.find(';')) != "shm") return true;
  std::string name;
  return shm_check::region_name(address, size, &name, problem) &&
         shm_check::region_usable(name, shm_check::loaded_region_version(), problem);
}

}  // namespace weft::ofi
