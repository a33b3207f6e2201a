#include "core/socket_address.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>

#include <cerrno>
#include <cstring>
#include <memory>

#include "core/byte_codec.h"

namespace weft {

int SocketAddress::family() const {
  return length == 0 ? AF_UNSPEC : storage.ss_family;
}

uint16_t SocketAddress::port() const {
  if (family() == AF_INET) return ntohs(reinterpret_cast<const sockaddr_in*>(&storage)->sin_port);
  if (family() == AF_INET6)
    return ntohs(reinterpret_cast<const sockaddr_in6*>(&storage)->sin6_port);
  return 0;
}

std::string SocketAddress::text() const {
  char host[INET6_ADDRSTRLEN] = {};
  if (family() == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(&storage);
    inet_ntop(AF_INET, &in->sin_addr, host, sizeof(host));
    return std::string(host) + ":" + std::to_string(port());
  }
  if (family() == AF_INET6) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(&storage);
    inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof(host));
    std::string scope;
    if (in6->sin6_scope_id != 0) {
      char name[IF_NAMESIZE] = {};
      scope = "%" + std::string(if_indextoname(in6->sin6_scope_id, name) != nullptr
                                    ? name
                                    : std::to_string(in6->sin6_scope_id));
    }
    return "[" + std::string(host) + scope + "]:" + std::to_string(port());
  }
  return "(none)";
}

SocketAddress SocketAddress::from_ipv4(const in_addr& address, uint16_t port) {
  SocketAddress out;
  auto* in = reinterpret_cast<sockaddr_in*>(&out.storage);
  in->sin_family = AF_INET;
  in->sin_port = htons(port);
  in->sin_addr = address;
  out.length = sizeof(sockaddr_in);
  return out;
}

SocketAddress SocketAddress::from_ipv6(const in6_addr& address, uint16_t port, uint32_t scope_id) {
  SocketAddress out;
  auto* in6 = reinterpret_cast<sockaddr_in6*>(&out.storage);
  in6->sin6_family = AF_INET6;
  in6->sin6_port = htons(port);
  in6->sin6_addr = address;
  in6->sin6_scope_id = scope_id;
  out.length = sizeof(sockaddr_in6);
  return out;
}

SocketAddress SocketAddress::with_port(uint16_t port) const {
  SocketAddress out = *this;
  if (family() == AF_INET) reinterpret_cast<sockaddr_in*>(&out.storage)->sin_port = htons(port);
  if (family() == AF_INET6) reinterpret_cast<sockaddr_in6*>(&out.storage)->sin6_port = htons(port);
  return out;
}

namespace {

bool fail(std::string* error, const std::string& why) {
  *error = "packed socket address: " + why;
  return false;
}

}  // namespace

void SocketAddress::pack(uint8_t* out) const {
  std::memset(out, 0, kPackedSize);
  if (family() == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(&storage);
    out[0] = 4;
    put_be16(out + 2, port());
    std::memcpy(out + 8, &in->sin_addr, 4);
  } else if (family() == AF_INET6) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(&storage);
    out[0] = 6;
    put_be16(out + 2, port());
    put_be32(out + 4, in6->sin6_scope_id);
    std::memcpy(out + 8, &in6->sin6_addr, 16);
  }
}

bool SocketAddress::unpack(const uint8_t* in, size_t size, SocketAddress* out, std::string* error) {
  if (size < kPackedSize) {
    return fail(error, std::to_string(size) + " bytes, needs " + std::to_string(kPackedSize));
  }
  if (in[0] != 4 && in[0] != 6) {
    return fail(error, "family byte is " + std::to_string(in[0]) + ", not 4 or 6");
  }
  if (in[1] != 0) return fail(error, "padding byte 1 is " + std::to_string(in[1]) + ", not 0");
  uint16_t port = get_be16(in + 2);
  if (port == 0) return fail(error, "port is 0");
  uint32_t scope_id = get_be32(in + 4);
  if (in[0] == 4) {
    if (scope_id != 0) {
      return fail(error, "IPv4 address with scope id " + std::to_string(scope_id) + ", not 0");
    }
    for (size_t i = 12; i < kPackedSize; ++i) {
      if (in[i] != 0) {
        return fail(error, "IPv4 address with nonzero byte " + std::to_string(i) +
                               " (bytes 12..23 must be 0)");
      }
    }
    in_addr address;
    std::memcpy(&address, in + 8, 4);
    *out = from_ipv4(address, port);
    return true;
  }
  in6_addr address;
  std::memcpy(&address, in + 8, 16);
  *out = from_ipv6(address, port, scope_id);
  return true;
}

namespace {

struct InterfaceSpec {
  std::vector<std::string> names;
  bool exclude = false;
  bool exact = false;
};

// NCCL_SOCKET_IFNAME syntax: [^][=]name[,name...]. Names are taken whole
// (an alias such as eth0:1 is a name, not a name and a port).
bool parse_spec(const std::string& spec, InterfaceSpec* out, std::string* error) {
  size_t pos = 0;
  if (pos < spec.size() && spec[pos] == '^') {
    out->exclude = true;
    ++pos;
  }
  if (pos < spec.size() && spec[pos] == '=') {
    out->exact = true;
    ++pos;
  }
  while (pos < spec.size()) {
    size_t comma = spec.find(',', pos);
    if (comma == std::string::npos) comma = spec.size();
    if (comma > pos) out->names.push_back(spec.substr(pos, comma - pos));
    pos = comma + 1;
  }
  if (pos > 0 && out->names.empty()) {
    *error = "interface list '" + spec + "' names no interface";
    return false;
  }
  return true;
}

bool starts_with(const std::string& text, const std::string& prefix) {
  return text.compare(0, prefix.size(), prefix) == 0;
}

bool listed(const InterfaceSpec& spec, const std::string& name) {
  for (const std::string& entry : spec.names) {
    if (spec.exact ? name == entry : starts_with(name, entry)) return true;
  }
  return false;
}

bool is_link_local(const SocketAddress& address) {
  if (address.family() != AF_INET6) return false;
  const auto* in6 = reinterpret_cast<const sockaddr_in6*>(&address.storage);
  return IN6_IS_ADDR_LINKLOCAL(&in6->sin6_addr);
}

const char* family_name(int family) {
  return family == AF_INET ? "IPv4" : family == AF_INET6 ? "IPv6" : "IPv4 or IPv6";
}

// Why `candidate` cannot be used at all, or "" when it can.
std::string rejection(const InterfaceAddress& candidate, const InterfaceSpec& spec, int family) {
  int have = candidate.address.family();
  if (have != AF_INET && have != AF_INET6) return "not IPv4/IPv6";
  if (family != AF_UNSPEC && have != family) return std::string("not ") + family_name(family);
  if (!candidate.up) return "down";
  if (spec.names.empty()) {
    if (starts_with(candidate.name, "docker") || starts_with(candidate.name, "virbr")) {
      return "docker*/virbr* skipped by default";
    }
    return "";
  }
  if (listed(spec, candidate.name) == spec.exclude) {
    return spec.exclude ? "excluded by the list" : "not in the list";
  }
  return "";
}

// Lower is better: loopback last, IPv6 link-local just before it, then IPv4
// before IPv6 when either family will do.
int rank(const InterfaceAddress& candidate, int family) {
  bool loopback = candidate.loopback || candidate.name == "lo";
  bool ipv6_second = family == AF_UNSPEC && candidate.address.family() == AF_INET6;
  return (loopback ? 4 : 0) + (is_link_local(candidate.address) ? 2 : 0) + (ipv6_second ? 1 : 0);
}

}  // namespace

bool pick_from(const std::vector<InterfaceAddress>& interfaces, const std::string& spec, int family,
               InterfaceAddress* out, std::string* error) {
  if (family != AF_INET && family != AF_INET6 && family != AF_UNSPEC) {
    *error = "address family " + std::to_string(family) + " is not AF_INET, AF_INET6 or AF_UNSPEC";
    return false;
  }
  InterfaceSpec parsed;
  if (!parse_spec(spec, &parsed, error)) return false;
  const InterfaceAddress* best = nullptr;
  std::string seen;
  for (const InterfaceAddress& candidate : interfaces) {
    std::string why = rejection(candidate, parsed, family);
    seen += (seen.empty() ? "" : ", ") + candidate.name + " " + candidate.address.text() +
            (why.empty() ? "" : " (" + why + ")");
    if (why.empty() && (best == nullptr || rank(candidate, family) < rank(*best, family))) {
      best = &candidate;
    }
  }
  if (best != nullptr) {
    *out = *best;
    return true;
  }
  *error = std::string("no usable ") + family_name(family) + " interface" +
           (spec.empty() ? "" : " for '" + spec + "'") +
           "; interfaces seen: " + (seen.empty() ? "none" : seen) +
           ". Set WEFT_SOCKET_IFNAME (or NCCL_SOCKET_IFNAME) to one of them";
  return false;
}

bool pick_local_address(const std::string& spec, int family, SocketAddress* out,
                        std::string* ifname, std::string* error) {
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) {
    *error = std::string("getifaddrs: ") + std::strerror(errno);
    return false;
  }
  std::unique_ptr<ifaddrs, void (*)(ifaddrs*)> owned(list, freeifaddrs);
  std::vector<InterfaceAddress> interfaces;
  for (const ifaddrs* entry = list; entry != nullptr; entry = entry->ifa_next) {
    if (entry->ifa_addr == nullptr) continue;
    InterfaceAddress item;
    item.name = entry->ifa_name;
    item.up = (entry->ifa_flags & IFF_UP) != 0;
    item.loopback = (entry->ifa_flags & IFF_LOOPBACK) != 0;
    if (entry->ifa_addr->sa_family == AF_INET) {
      const auto* in = reinterpret_cast<const sockaddr_in*>(entry->ifa_addr);
      item.address = SocketAddress::from_ipv4(in->sin_addr, 0);
    } else if (entry->ifa_addr->sa_family == AF_INET6) {
      const auto* in6 = reinterpret_cast<const sockaddr_in6*>(entry->ifa_addr);
      item.address = SocketAddress::from_ipv6(in6->sin6_addr, 0, in6->sin6_scope_id);
    } else {
      continue;  // AF_PACKET and the like: no IP address
    }
    interfaces.push_back(std::move(item));
  }
  InterfaceAddress chosen;
  if (!pick_from(interfaces, spec, family, &chosen, error)) return false;
  *out = chosen.address.with_port(0);
  if (ifname != nullptr) *ifname = chosen.name;
  return true;
}

}  // namespace weft
