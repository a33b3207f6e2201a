// The native verbs transport's bytes from a peer: the listen handle's
// payload, the connection info (a link message or on the side channel)
// and the clear-to-send entries its NIC writes into our FIFO. What decodes
// is in range and re-encodes unchanged.
#include <algorithm>
#include <cstring>
#include <string>

#include "fuzz_util.h"
#include "verbs/wire.h"

using namespace weft;
using namespace weft::verbs;

namespace {

void connection_info(const uint8_t* data, size_t size, Role role) {
  ConnectionInfo decoded;
  std::string error;
  if (!decode_connection_info(data, size, role, &decoded, &error)) {
    FUZZ_CHECK(!error.empty());
    return;
  }
  uint8_t bytes[kConnectionInfoSize];
  encode_connection_info(decoded, bytes);
  ConnectionInfo again;
  FUZZ_CHECK(decode_connection_info(bytes, sizeof(bytes), role, &again, &error));
  uint8_t twice[kConnectionInfoSize];
  encode_connection_info(again, twice);
  FUZZ_CHECK(std::memcmp(bytes, twice, sizeof(bytes)) == 0);
}

void fifo(const uint8_t* data, size_t size) {
  FifoEntry entries[kMaxRecvs] = {};
  if (size < 4) return;
  uint32_t sequence;
  std::memcpy(&sequence, data, 4);
  std::memcpy(entries, data + 4, std::min(size - 4, sizeof(entries)));
  int count = -1;
  std::string error;
  switch (check_cts_group(entries, sequence, &count, &error)) {
    case CtsState::Ready:
      FUZZ_CHECK(count >= 1 && count <= kMaxRecvs);
      break;
    case CtsState::Invalid:
      FUZZ_CHECK(!error.empty());
      break;
    case CtsState::NotYet:
      break;
  }
}

// First byte: the payload size the handle header claims.
void listen_payload(const uint8_t* data, size_t size) {
  if (size < 1) return;
  ListenHandle handle;
  handle.payload_size = data[0];
  std::memcpy(handle.payload, data + 1, std::min(size - 1, sizeof(handle.payload)));
  ListenPayload decoded;
  std::string error;
  if (!decode_listen_payload(handle, &decoded, &error)) {
    FUZZ_CHECK(!error.empty());
    return;
  }
  FUZZ_CHECK(handle.payload_size == SocketAddress::kPackedSize ||
             (decoded.process.token != 0 && decoded.mailbox != 0));
  ListenHandle again;
  encode_listen_payload(decoded.hub, decoded.process, decoded.mailbox, &again);
  FUZZ_CHECK(again.payload_size == handle.payload_size);
  ListenPayload twice;
  FUZZ_CHECK(decode_listen_payload(again, &twice, &error));
  FUZZ_CHECK(twice.hub.text() == decoded.hub.text() && twice.mailbox == decoded.mailbox &&
             twice.process.token == decoded.process.token);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  switch (data[0] % 4) {
    case 0:
      connection_info(data + 1, size - 1, Role::Sender);
      break;
    case 1:
      connection_info(data + 1, size - 1, Role::Receiver);
      break;
    case 2:
      fifo(data + 1, size - 1);
      break;
    default:
      listen_payload(data + 1, size - 1);
      break;
  }
  return 0;
}
