// libfabric connection setup: the listen handle's payload comes through
// NCCL from any peer, the connect request and its acknowledgement from any
// peer that can reach an endpoint. What decodes holds
// only valid values and survives a re-encode unchanged.
#include <cstring>
#include <string>

#include "fuzz_util.h"
#include "ofi/wire/connection_messages.h"

using namespace weft::ofi;

namespace {

void request(const uint8_t* data, size_t size) {
  ConnectRequest decoded;
  std::string error;
  if (!decode_connect_request(data, size, &decoded, &error)) {
    FUZZ_CHECK(!error.empty());
    return;
  }
  FUZZ_CHECK(decoded.rails >= 1 && decoded.rails <= kMaxRails);
  FUZZ_CHECK(decoded.address_size >= 1 && decoded.address_size <= kMaxAddressSize);
  uint8_t bytes[kConnectRequestSize];
  encode_connect_request(decoded, bytes);
  ConnectRequest again;
  FUZZ_CHECK(decode_connect_request(bytes, sizeof(bytes), &again, &error));
  FUZZ_CHECK(again.connector_comm_id == decoded.connector_comm_id);
  FUZZ_CHECK(again.secret == decoded.secret);
  FUZZ_CHECK(again.protocol == decoded.protocol && again.rails == decoded.rails);
  FUZZ_CHECK(again.address_size == decoded.address_size);
  FUZZ_CHECK(std::memcmp(again.address, decoded.address, decoded.address_size) == 0);
  FUZZ_CHECK(again.process.token == decoded.process.token);
}

void ack(const uint8_t* data, size_t size) {
  ConnectAck decoded;
  std::string error;
  if (!decode_connect_ack(data, size, &decoded, &error)) {
    FUZZ_CHECK(!error.empty());
    return;
  }
  FUZZ_CHECK(decoded.rails >= 1 && decoded.rails <= kMaxRails);
  for (int r = 1; r < decoded.rails; ++r) {
    FUZZ_CHECK(decoded.address_size[r] >= 1 && decoded.address_size[r] <= kMaxAddressSize);
  }
  uint8_t bytes[kConnectAckSize];
  encode_connect_ack(decoded, bytes);
  ConnectAck again;
  FUZZ_CHECK(decode_connect_ack(bytes, sizeof(bytes), &again, &error));
  uint8_t twice[kConnectAckSize];
  encode_connect_ack(again, twice);
  FUZZ_CHECK(std::memcmp(bytes, twice, sizeof(bytes)) == 0);
}

void listen_payload(const uint8_t* data, size_t size) {
  ListenPayload decoded;
  std::string error;
  if (size > weft::kMaxHandlePayload) return;  // the handle header bounds it
  if (!decode_listen_payload(data, size, &decoded, &error)) {
    FUZZ_CHECK(!error.empty());
    return;
  }
  FUZZ_CHECK(decoded.address_size >= 1 && decoded.address_size <= kMaxListenAddress);
  uint8_t bytes[weft::kMaxHandlePayload];
  const size_t encoded = encode_listen_payload(decoded, bytes);
  FUZZ_CHECK(encoded == size);
  FUZZ_CHECK(std::memcmp(bytes, data, size) == 0);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  switch (data[0] % 3) {
    case 0:
      request(data + 1, size - 1);
      break;
    case 1:
      ack(data + 1, size - 1);
      break;
    default:
      listen_payload(data + 1, size - 1);
  }
  return 0;
}
