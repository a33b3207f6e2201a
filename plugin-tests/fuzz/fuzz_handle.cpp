// The listen handle: NCCL copies 128 bytes from a peer (or a corrupt or
// foreign handle). Decoding never reads past them; what decodes re-encodes
// to the same bytes.
#include <cstring>
#include <string>

#include "core/handle_header.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const auto expected = (data[0] & 1) ? weft::TransportId::Verbs : weft::TransportId::Ofi;
  ++data;
  --size;
  weft::ListenHandle handle;
  std::string error;
  if (!weft::decode_handle(data, size, expected, &handle, &error)) {
    FUZZ_CHECK(!error.empty());
    return 0;
  }
  FUZZ_CHECK(handle.transport == expected);
  FUZZ_CHECK(handle.payload_size >= 1 && handle.payload_size <= weft::kMaxHandlePayload);
  uint8_t again[weft::kHandleSize];
  weft::encode_handle(handle, again);
  weft::ListenHandle redecoded;
  FUZZ_CHECK(weft::decode_handle(again, sizeof(again), expected, &redecoded, &error));
  FUZZ_CHECK(redecoded.listen_id == handle.listen_id);
  FUZZ_CHECK(redecoded.fingerprint == handle.fingerprint);
  FUZZ_CHECK(redecoded.connect_cookie == handle.connect_cookie);
  FUZZ_CHECK(handle.secret != 0 && redecoded.secret == handle.secret);
  FUZZ_CHECK(redecoded.payload_size == handle.payload_size);
  FUZZ_CHECK(std::memcmp(redecoded.payload, handle.payload, handle.payload_size) == 0);
  return 0;
}
