// An IPv4/IPv6 socket address, its fixed-size form for listen handles, and
// the choice of the local interface a side-channel listener binds to.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace weft {

struct SocketAddress {
  sockaddr_storage storage{};
  socklen_t length = 0;

  // AF_INET, AF_INET6, or AF_UNSPEC when empty.
  int family() const;
  // Host byte order; 0 for an empty address.
  uint16_t port() const;
  // "10.1.2.3:4567", "[fe80::1%veth0]:4567" (scope as a number when no
  // local interface has that index), "(none)" when empty.
  std::string text() const;

  static SocketAddress from_ipv4(const in_addr& address, uint16_t port);
  static SocketAddress from_ipv6(const in6_addr& address, uint16_t port, uint32_t scope_id = 0);
  // Same address, another port (a listener asks for port 0, then learns its own).
  SocketAddress with_port(uint16_t port) const;

  // Packed layout (all multi-byte fields big-endian):
  //   0  family u8: 4 or 6        1  zero u8
  //   2  port u16 (never 0)       4  IPv6 scope id u32 (0 for IPv4)
  //   8  address[16]: IPv4 in the first 4 bytes, the other 12 zero
  // The scope id is the packing host's interface index; it only means the
  // same interface on the same host, which is when link-local gets chosen.
  static constexpr size_t kPackedSize = 24;
  // Writes kPackedSize bytes; an address that is neither IPv4 nor IPv6
  // packs as zeros, which unpack() refuses.
  void pack(uint8_t* out) const;
  // Reads the first kPackedSize of `size` bytes (a handle payload may go on
  // after it). False, with the bad field named, for anything malformed.
  static bool unpack(const uint8_t* in, size_t size, SocketAddress* out, std::string* error);
};

// One address of one network interface, as getifaddrs() reports it.
struct InterfaceAddress {
  std::string name;
  SocketAddress address;
  bool up = true;
  bool loopback = false;
};

// The local address for a listener, chosen like NCCL_SOCKET_IFNAME: `spec`
// is a comma list of interface name prefixes ("eth,ib"); a leading '^'
// excludes the listed ones instead; '=' (after any '^') makes names exact.
// Empty spec: any interface but docker* and virbr*. Down interfaces never
// count. Among the rest: loopback only when nothing else is left, IPv6
// link-local only before loopback, IPv4 before IPv6 when `family` is
// AF_UNSPEC, then the interfaces' order. `family`: AF_INET, AF_INET6 or
// AF_UNSPEC. *out's port is 0. On failure the error lists the interfaces
// seen and names WEFT_SOCKET_IFNAME / NCCL_SOCKET_IFNAME.
bool pick_local_address(const std::string& spec, int family, SocketAddress* out,
                        std::string* ifname, std::string* error);

// The same selection on a given interface list (what unit tests call).
bool pick_from(const std::vector<InterfaceAddress>& interfaces, const std::string& spec, int family,
               InterfaceAddress* out, std::string* error);

}  // namespace weft
