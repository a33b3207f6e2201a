// Peer addresses: checking, inserting into the address vector (cached),
// and printing them.
#include <rdma/fi_domain.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstring>
#include <string>

#include "ofi/endpoint/endpoint.h"
#include "ofi/endpoint/peer_check.h"
#include "weft/log.h"

namespace weft::ofi {

namespace {

// What efa reads of an address: GID, QP number, pad, qkey. fi_getname adds
// a host pointer after them that means nothing to a peer.
constexpr size_t kEfaAddressBytes = 24;

}  // namespace

ncclResult_t Endpoint::insert_address(const uint8_t* peer_address, size_t size, fi_addr_t* out) {
  // One key per peer: bytes the provider ignores must not make a second
  // AV entry for the same QP.
  uint8_t normalized[sizeof(local_address_)] = {};
  const uint8_t* address = peer_address;
  if (address_format_ == FI_ADDR_EFA && size > kEfaAddressBytes && size <= sizeof(normalized)) {
    std::memcpy(normalized, peer_address, kEfaAddressBytes);
    address = normalized;
  }
  std::string key(reinterpret_cast<const char*>(address), size);
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = address_cache_.find(key);
  if (it != address_cache_.end()) {
    *out = it->second;
    return ncclSuccess;
  }
  std::string problem;
  if (!plausible_peer_address(address, size, &problem)) {
    WEFT_WARN(
        "%s: rejecting peer address: %s (corrupt handle, or peers using different "
        "providers?)",
        device_name_.c_str(), problem.c_str());
    return ncclInvalidArgument;
  }
  // shm maps the region the address names: a stale or forged one crashes it.
  if (!peer_address_usable(provider_name_, address, size, &problem)) {
    WEFT_WARN("%s: cannot use peer %s: %s", device_name_.c_str(),
              address_to_string(address, size).c_str(), problem.c_str());
    return ncclRemoteError;
  }
  fi_addr_t fi_addr = FI_ADDR_NOTAVAIL;
  int inserted;
  {
    std::lock_guard<std::mutex> io_lock(domain_.io_mutex());
    inserted = fi_av_insert(av_.get(), address, 1, &fi_addr, 0, nullptr);
  }
  if (inserted != 1 || fi_addr == FI_ADDR_NOTAVAIL) {
    // One entry per peer endpoint, never per comm: a full vector means
    // more peer processes than the provider's address vector takes.
    WEFT_WARN(
        "%s: peer address %s rejected by the address vector (%s); it holds %zu peers, one per "
        "peer process and device, whatever the number of comms",
        device_name_.c_str(), address_to_string(address, size).c_str(),
        inserted < 0 ? fi_strerror(-inserted) : "not inserted", address_cache_.size());
    return ncclSystemError;
  }
  address_cache_.emplace(std::move(key), fi_addr);
  *out = fi_addr;
  return ncclSuccess;
}

bool Endpoint::plausible_peer_address(const uint8_t* address, size_t size,
                                      std::string* problem) const {
  switch (address_format_) {
    case FI_ADDR_STR: {
      // "prefix://..." printable text, with the same prefix as ours.
      const char* local = reinterpret_cast<const char*>(local_address_);
      const char* scheme_end = std::strstr(local, "://");
      size_t prefix = scheme_end != nullptr ? static_cast<size_t>(scheme_end - local) + 3 : 0;
      if (size <= prefix || std::memcmp(address, local, prefix) != 0) {
        *problem = "it does not start with the provider's scheme";
        return false;
      }
      for (size_t i = 0; i < size && address[i] != 0; ++i) {
        if (address[i] < 0x20 || address[i] > 0x7e) {
          *problem = "it contains non-printable bytes";
          return false;
        }
      }
      return true;
    }
    case FI_SOCKADDR:
    case FI_SOCKADDR_IN:
    case FI_SOCKADDR_IN6: {
      sa_family_t family = 0;
      sa_family_t local_family = 0;
      if (size >= sizeof(family)) std::memcpy(&family, address, sizeof(family));
      std::memcpy(&local_family, local_address_, sizeof(local_family));
      if (size != local_address_size_ || family != local_family) {
        *problem = "socket address of family " + std::to_string(family) + " and " +
                   std::to_string(size) + " bytes, expected family " +
                   std::to_string(local_family) + " and " + std::to_string(local_address_size_);
        return false;
      }
      return true;
    }
    case FI_ADDR_EFA:
      // GID (16 bytes), QP number (2), then 2 pad bytes that efa never
      // reads: an address differing only there would be a second AV entry
      // for the same QP, so a corrupt one must be refused here.
      if (size != local_address_size_ || size < 20) {
        *problem = std::to_string(size) + " bytes, expected " + std::to_string(local_address_size_);
        return false;
      }
      if (address[18] != 0 || address[19] != 0) {
        *problem = "the EFA address' pad bytes are not zero";
        return false;
      }
      return true;
    default:
      if (size != local_address_size_) {
        *problem = std::to_string(size) + " bytes, expected " + std::to_string(local_address_size_);
        return false;
      }
      return true;
  }
}

std::string Endpoint::address_to_string(const uint8_t* address, size_t size) const {
  // fi_av_straddr needs an address the provider understands; bound its work
  // to a local copy so a malformed peer address cannot be over-read.
  uint8_t copy[256] = {};
  std::memcpy(copy, address, std::min(size, sizeof(copy)));
  char text[256] = {};
  size_t length = sizeof(text);
  std::lock_guard<std::mutex> lock(domain_.io_mutex());
  const char* result = fi_av_straddr(av_.get(), copy, text, &length);
  return result != nullptr ? std::string(text) : std::string("<unprintable address>");
}

}  // namespace weft::ofi
