// What a peer names of itself: the liveness identity and hello, packed
// socket addresses, the shm region name inside a libfabric address
// (which weft checks before libfabric maps the file), and the header of a
// message on a liveness link. What decodes is in range and re-encodes
// unchanged; a region name is never a path.
#include <cstring>
#include <string>

#include "core/link_messages.h"
#include "core/peer_links.h"
#include "core/socket_address.h"
#include "fuzz_util.h"
#include "ofi/endpoint/peer_check.h"

using namespace weft;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const uint8_t selector = data[0];
  ++data;
  --size;
  std::string error;
  switch (selector % 5) {
    case 0: {
      PeerIdentity identity;
      if (!PeerIdentity::unpack(data, size, &identity, &error)) return 0;
      uint8_t bytes[PeerIdentity::kPackedSize];
      identity.pack(bytes);
      PeerIdentity again;
      FUZZ_CHECK(PeerIdentity::unpack(bytes, sizeof(bytes), &again, &error));
      FUZZ_CHECK(again.token == identity.token);
      if (identity.token != 0) FUZZ_CHECK(again.address.text() == identity.address.text());
      break;
    }
    case 1: {
      if (size < kLinkHelloSize) return 0;
      LinkHello hello;
      if (!decode_link_hello(data, &hello, &error)) return 0;
      FUZZ_CHECK(hello.token != 0 && hello.proof != 0);
      uint8_t bytes[kLinkHelloSize];
      encode_link_hello(hello, bytes);
      FUZZ_CHECK(std::memcmp(bytes, data, kLinkHelloSize) == 0);
      break;
    }
    case 2: {
      SocketAddress address;
      if (!SocketAddress::unpack(data, size, &address, &error)) return 0;
      FUZZ_CHECK(address.port() != 0);
      uint8_t bytes[SocketAddress::kPackedSize];
      address.pack(bytes);
      SocketAddress again;
      FUZZ_CHECK(SocketAddress::unpack(bytes, sizeof(bytes), &again, &error));
      FUZZ_CHECK(again.text() == address.text());
      break;
    }
    case 4: {
      if (size < kLinkFrameHeaderSize) return 0;
      LinkFrameHeader header;
      if (!decode_link_frame_header(data, &header, &error)) {
        FUZZ_CHECK(!error.empty());
        return 0;
      }
      FUZZ_CHECK(header.length <= kMaxLinkPayload && header.to != 0);
      uint8_t bytes[kLinkFrameHeaderSize];
      encode_link_frame_header(header, bytes);
      FUZZ_CHECK(std::memcmp(bytes, data, kLinkFrameHeaderSize) == 0);
      break;
    }
    default: {
      std::string name;
      if (!ofi::shm_check::region_name(data, size, &name, &error)) return 0;
      FUZZ_CHECK(!name.empty() && name.size() <= ofi::shm_check::kNameMax);
      FUZZ_CHECK(name.find('/') == std::string::npos && name != "." && name != "..");
      break;
    }
  }
  return 0;
}
