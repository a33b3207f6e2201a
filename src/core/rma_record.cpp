#include "core/rma_record.h"

#include <cstdio>

#include "core/byte_codec.h"
#include "core/listen_secret.h"

namespace weft {
namespace {

constexpr uint32_t kRecordMagic = 0x414d5257;  // "WRMA"
constexpr uint8_t kRecordVersion = 3;          // 2: the proof; 3: the ask
constexpr uint32_t kSignalMagic = 0x47495357;  // "WSIG"
constexpr uint8_t kSignalVersion = 1;

const char* kind_name(RmaRecordKind kind) {
  switch (kind) {
    case RmaRecordKind::Hello:
      return "hello";
    case RmaRecordKind::Window:
      return "window";
    case RmaRecordKind::WindowAsk:
      return "ask";
  }
  return "unknown";
}

bool refuse(std::string* error, const char* format, unsigned long long a, unsigned long long b) {
  char text[160];
  std::snprintf(text, sizeof(text), format, a, b);
  *error = text;
  return false;
}

}  // namespace

void encode_rma_record(const RmaRecord& record, uint8_t* out) {
  put_le32(out, kRecordMagic);
  out[4] = static_cast<uint8_t>(record.kind);
  out[5] = kRecordVersion;
  put_le16(out + 6, 0);
  put_le32(out + 8, record.rank);
  put_le32(out + 12, record.ranks);
  put_le32(out + 16, record.round);
  put_le32(out + 20, 0);
  bool bare = record.kind != RmaRecordKind::Window;
  put_le64(out + 24, bare ? 0 : record.address);
  put_le64(out + 32, bare ? 0 : record.key);
  put_le64(out + 40, bare ? 0 : record.size);
  put_le64(out + 48, record.proof);
}

bool rma_record_proven(const uint8_t* bytes, size_t size, std::span<const uint64_t> secrets) {
  if (size != kRmaRecordSize || get_le32(bytes) != kRecordMagic || bytes[5] != kRecordVersion)
    return false;
  const uint32_t rank = get_le32(bytes + 8);
  return rank < secrets.size() && listen_secret_matches(secrets[rank], get_le64(bytes + 48));
}

namespace {

// The fields every record has, checked alike whatever it answers.
bool decode_common(const uint8_t* bytes, size_t size, uint32_t ranks, uint32_t self, RmaRecord* out,
                   std::string* error) {
  if (size != kRmaRecordSize) {
    return refuse(error, "%llu bytes, a record has %llu", size, kRmaRecordSize);
  }
  if (get_le32(bytes) != kRecordMagic) {
    return refuse(error, "magic 0x%08llx is not weft's one-sided record (0x%08llx)",
                  get_le32(bytes), kRecordMagic);
  }
  if (bytes[5] != kRecordVersion) {
    return refuse(error, "record version %llu, this weft speaks %llu", bytes[5], kRecordVersion);
  }
  if (get_le16(bytes + 6) != 0 || get_le32(bytes + 20) != 0) {
    return refuse(error, "reserved fields set (%llu, %llu)", get_le16(bytes + 6),
                  get_le32(bytes + 20));
  }
  out->kind = static_cast<RmaRecordKind>(bytes[4]);
  out->rank = get_le32(bytes + 8);
  out->ranks = get_le32(bytes + 12);
  out->round = get_le32(bytes + 16);
  out->address = get_le64(bytes + 24);
  out->key = get_le64(bytes + 32);
  out->size = get_le64(bytes + 40);
  out->proof = get_le64(bytes + 48);
  if (out->kind != RmaRecordKind::Hello && out->kind != RmaRecordKind::Window &&
      out->kind != RmaRecordKind::WindowAsk) {
    return refuse(error, "unknown record kind %llu (hello %llu, window 2, ask 3)", bytes[4],
                  static_cast<unsigned>(RmaRecordKind::Hello));
  }
  if (out->ranks != ranks) {
    return refuse(error, "the sender counts %llu ranks, this rank %llu", out->ranks, ranks);
  }
  if (out->rank >= out->ranks || out->rank == self) {
    return refuse(error, "sender rank %llu is not another rank of %llu", out->rank, out->ranks);
  }
  if (out->kind != RmaRecordKind::Window && (out->address | out->key | out->size) != 0) {
    return refuse(error,
                  out->kind == RmaRecordKind::Hello
                      ? "a hello record with a region (address 0x%llx, size %llu)"
                      : "an ask record with a region (address 0x%llx, size %llu)",
                  out->address, out->size);
  }
  return true;
}

}  // namespace

bool decode_rma_record(const uint8_t* bytes, size_t size, const RmaRecord& expected, uint32_t self,
                       RmaRecord* out, std::string* error) {
  if (!decode_common(bytes, size, expected.ranks, self, out, error)) return false;
  if (out->kind != expected.kind) {
    *error = std::string("a ") + kind_name(out->kind) + " record where a " +
             kind_name(expected.kind) +
             " was due: the ranks registered or connected in a different order";
    return false;
  }
  if (out->round != expected.round) {
    return refuse(error,
                  "collective step %llu where %llu was due: the ranks registered in a "
                  "different order",
                  out->round, expected.round);
  }
  return true;
}

bool decode_rma_on_demand_record(const uint8_t* bytes, size_t size, uint32_t ranks, uint32_t self,
                                 RmaRecord* out, std::string* error) {
  if (!decode_common(bytes, size, ranks, self, out, error)) return false;
  if (out->kind == RmaRecordKind::Hello) {
    *error = "a hello record, which a comm with windows on demand never sends";
    return false;
  }
  return true;
}

void encode_rma_signal(const RmaSignal& signal, uint8_t* out) {
  put_le32(out, kSignalMagic);
  out[4] = kSignalVersion;
  out[5] = out[6] = out[7] = 0;
  put_le32(out + 8, signal.region);
  put_le32(out + 12, signal.sender);
  put_le64(out + 16, signal.offset);
  put_le64(out + 24, signal.value);
}

bool decode_rma_signal(const uint8_t* bytes, size_t size, uint32_t ranks, RmaSignal* out,
                       std::string* error) {
  if (size != kRmaSignalSize) {
    return refuse(error, "a signal message of %llu bytes, expected %llu", size, kRmaSignalSize);
  }
  if (get_le32(bytes) != kSignalMagic) {
    return refuse(error, "magic 0x%08llx is not weft's signal message (0x%08llx)", get_le32(bytes),
                  kSignalMagic);
  }
  if (bytes[4] != kSignalVersion) {
    return refuse(error, "signal message version %llu, this weft speaks %llu", bytes[4],
                  kSignalVersion);
  }
  if ((bytes[5] | bytes[6] | bytes[7]) != 0) {
    return refuse(error, "reserved bytes of a signal message set (%llu, %llu)", bytes[5],
                  static_cast<unsigned>(bytes[6] | bytes[7]));
  }
  out->region = get_le32(bytes + 8);
  out->sender = get_le32(bytes + 12);
  out->offset = get_le64(bytes + 16);
  out->value = get_le64(bytes + 24);
  if (out->sender >= ranks) {
    return refuse(error, "signal from rank %llu of %llu ranks", out->sender, ranks);
  }
  if (out->offset % 8 != 0) {
    return refuse(error, "signal at offset %llu of region %llu: not a 64-bit word", out->offset,
                  out->region);
  }
  return true;
}

}  // namespace weft
